// Package coordinator holds the cluster metadata that raft group 0 agrees
// on, and turns it into work on every node.
//
// The metadata state machine (Metadata) records broker registrations and
// liveness, topics with their partition→replica placement and configs,
// producer-id blocks, and per-partition leadership hints. Commands are small
// JSON documents proposed to group 0; applying one is a pure function of the
// current state and the command, so every replica of group 0 reaches the
// same state. Placement (which brokers host a new partition) is computed at
// apply time from that state, so a CreateTopics sent to any node lands the
// same way everywhere.
//
// The metadata is small, so it lives in memory and is rebuilt on restart
// from group 0's raft snapshot plus the WAL after it. That is a departure
// from the shared design's badger store for group 0; consumer offsets (which
// can be large) are another matter.
//
// Security state lives here too: SCRAM credentials (State.ScramUsers,
// scram.go) and Kafka ACLs (State.ACLs, acl.go). CreateACLs adds bindings
// all or none, each held once; DeleteACLs removes every binding any of
// its filters matches and answers per filter what it matched. Every held
// ACL passes auth.ACL.Check (state_check.go), and a refused command
// changes nothing.
//
// Group 0 never chooses partition leaders in raft mode. A node that becomes
// leader of a partition's raft group proposes a leadership hint, which
// Metadata keeps per partition with the highest term seen; Kafka Metadata
// responses are built from these hints, and clients retry on a stale one as
// they do with Kafka.
//
// ISR mode (replication.mode=isr, issue 20) is the other way round: group
// 0 is the only writer of each ISR partition's leader, leader epoch
// (LeaderTerm), ISR, ELR, last known leader, partition epoch and
// recovering flag, as Kafka's KRaft controller is. Elections are computed
// at apply (isr_elect.go, after Kafka's PartitionChangeBuilder) on
// SetAlive, RegisterBroker, AlterPartition, ElectLeaders, AlterConfigs,
// UpdateFeatures and ControlledShutdown: the current leader if valid, else the first ISR member
// in replica order that is alive, else with the ISR empty an ELR member,
// else (ELR on) the last known leader, else with
// unclean.leader.election.enable any alive replica, which alone becomes
// the ISR and is marked Recovering. A dead broker leaves every ISR, but
// never empties one unless ELR is on, or its last member resigns because
// its log lost durable records (AlterPartitionItem.LostData: it also
// leaves the ELR and the last known leader, and is not elected back; a
// partition so left offline elects, once every replica has reported its
// log end, the one ending at the newest epoch, furthest: isr_recover.go); a
// broker registering with a new StartID (a restart) is fenced, leaves ISR
// and ELR, and is then unfenced. A broker about to stop proposes its ControlledShutdown
// (KIP-841, shutdown.go): it is fenced as a dead broker is (keeping its
// ELR places, as a clean shutdown does) while it still serves, and stays
// ineligible to lead, join an ISR or take leadership back by leader
// balance (Broker.Eligible) until it registers with a new StartID;
// SetAlive does not undo it. A broker in maintenance mode
// (SetMaintenance, maintenance.go; Redpanda's) stays eligible and in
// every ISR, but every election runs first without it and takes it only
// when no other replica may lead cleanly (an ISR, or with the ISR empty
// an ELR, member); SetMaintenance on re-elects where it led. At most one
// broker is in maintenance; a registration keeps the mark, so it
// survives restarts. Raft partitions and group 0 it leaves to the
// node, which hands their leaderships over while the mark is on. An
// unclean ElectLeaders (ElectLeaders.Unclean, Kafka's ElectionType 1)
// may elect any eligible replica of a leaderless partition whatever
// its topic's unclean.leader.election.enable. AlterPartition is a compare-and-set on leader epoch and
// partition epoch with Kafka's error codes. ELR is a cluster feature in
// the state (UpdateFeatures), not a node flag, since apply must not
// depend on the node. Invariants, checked on every restore (state_check.go)
// and after every apply in the tests: a leader is in the ISR unless it is
// recovering; ISR and ELR are distinct replicas with nothing in common;
// raft partitions have no ISR state; at most one broker is in
// maintenance, and it leads an ISR partition only when no other ISR
// member is eligible; leader, partition and broker epochs
// never go back, a new leader comes with a new leader epoch and any change
// with a new partition epoch. ISR mode is refused unless the creating
// command sets CreateTopic.AllowISR, which the broker's CreateTopics
// does (entries written before it replay refused, as they were).
//
// Topic configs: validateTopicConfigs runs at apply on CreateTopic and
// on AlterConfigs' resulting configs, so its rules are frozen for the
// keys old entries could hold. flush.messages and flush.ms are refused on
// raft topics there (they were unknown keys, so refused, before ISR
// mode). The newer rules (min.insync.replicas and
// unclean.leader.election.enable refused on raft topics, which apply
// used to accept; replication.mode changes explained) live in
// CheckCreate and CheckAlter, which the broker runs before it proposes,
// validateOnly or not. Rules on ISR topics only (min.insync.replicas
// above the replication factor) run at apply too: no old entry holds an
// ISR topic.
//
// Topic defaults: a topic takes a config it does not set from the
// cluster's topic defaults (State.TopicDefaults): Kafka's broker configs
// that default topic configs (log.retention.ms, log.cleanup.policy,
// min.insync.replicas, ...; brokerconfigs.go), resolved into topic config
// values, and failing those from Kafka's own default. Kafka resolves them
// per broker from its own server.properties when it reads them; raftq
// holds them in group 0 instead, because every replica removes records by
// them (retention, compaction) and apply elects ISR leaders by them, so
// replicas that resolved them differently would diverge. Nor are they
// copied into each topic at creation: a changed default reaches every
// topic that sets none, as in Kafka, and DescribeConfigs tells a topic's
// own value from an inherited one. The metadata leader proposes
// SetTopicDefaults with its node's whenever they differ from the state's
// (the metadata leader's win, as for ELR); a log written before them
// replays with none, as it was applied. Topic.Config reads them through
// the topic, which carries its state's (every topic of a state does:
// state_check.go).
//
// Reassignment (reassign.go, docs/reassignment.md): ReassignPartitions
// records a move as Target and Original and widens Replicas to Target
// followed by every other broker that may hold a copy; only the end of a
// move shrinks it, so no replica a quorum may need is dropped early. A
// cancel retargets Original. A raft partition's leader changes its
// group's membership step by step (PlanMove, a pure function of the
// group's configuration and the target, so crashes and cancels need no
// recovery) and proposes CompleteReassignment, a compare-and-set on the
// target; an ISR partition's move ends at apply when its ISR holds the
// target. Invariants (checkMove): Target and Original are set together,
// on a partition marked Moved, with Replicas starting with Target and
// holding Original. A Decommissioned broker gets no new replica, and the
// metadata leader moves its replicas away (decommission.go);
// RemoveBroker forgets an empty broker and bars its incarnation
// (State.RemovedIncarnations) from registering or being admitted again;
// its id stays in State.Removed, which takes it out of group 0's
// configuration, until a node is admitted under the id again. A
// restarted node reconciles only once group 0 has applied every entry
// its log held at open: a replayed state from before a move onto the
// node would otherwise remove a replica it holds.
//
// Versions: every start replays group 0's log from its last snapshot with
// the binary now running, so apply may never change how an entry already
// written is applied. A new rule comes with a new command field that only
// new proposers set (CreateTopic.RefuseCollision, AlterConfigs.Replace,
// ElectLeaders.Unclean); entries without it replay as before
// (testdata/premaintenance-logs.jsonl holds logs of the binary before
// maintenance mode, replayed to its states). Nodes of different versions must
// not share a cluster: an older one would ignore the new fields. A new
// command (ControlledShutdown, SetMaintenance) is proposed only when every
// registered broker says it applies it (Broker.ControlledShutdown,
// Broker.SetMaintenance, Broker.ElectUnclean, Broker.ResignLostData,
// Broker.ACLs, Broker.Scram).
//
// Controller is a node's part in the control plane: it opens group 0 on
// the node's raft host and runs the loops that act on the metadata:
// registration (re-proposed whenever the registration differs, and so
// on every start: each start has a new StartID), reconcile
// (the node's hook that opens and removes its replicas, on every change),
// leadership hints of the partitions the node leads, the metadata
// leader's housekeeping (learners beyond the voters and admitted nodes,
// group 0's voters (see Membership below), broker
// liveness from the transport, the ELR feature and the topic defaults: it
// proposes UpdateFeatures and SetTopicDefaults when the state differs
// from its own ControllerConfig.EligibleLeaderReplicas and TopicDefaults,
// so the metadata leader's flags win) and leader balance (leadership back
// to the preferred replica, unless it is in controlled shutdown or in
// maintenance: Broker.TakesLeadership). For a
// node's drain it proposes the ControlledShutdown and hands group 0's
// leadership to the most caught-up eligible voter, one not in
// maintenance if there is one (controller_drain.go); a node in
// maintenance hands group 0's leadership over the same way.
// It sees the node's replicas only as LocalReplica,
// and the transport only as Connected. Its proposals fail with
// ErrNoController when no group-0 leader took them. Close stops and waits
// for every loop it started.
//
// Membership (admit.go, voters.go, controller_voters.go): a node that
// joins a running cluster is admitted by AdmitNode, which records its
// peer address and data directory incarnation in State.Admitted, where
// every node's transport learns the address (State.PeerAddrs). An
// admitted id keeps its incarnation: AdmitNode again with the same one
// only moves the address (a retried join), and another incarnation of an
// admitted or registered id is refused at apply (CheckAdmission), as is
// a RegisterBroker from another incarnation than the admitted one
// (State.check holds it on every restore). The
// metadata leader adds every initial node and every admitted one to
// group 0 as a learner once its own transport knows the address
// (ControllerConfig.HasPeer), so that the conf change never reaches raft
// before the address reaches the transport; one change at a time.
//
// Group 0's voters are bootstrapped from the initial cluster (Voters,
// whatever MetadataVoters says: nodes that bootstrapped different voters
// would hold different committed entries at the same indexes) and then
// changed by the metadata leader alone, towards NextVoters(members,
// MetadataVoters), by one ConfChangeV2 with JointImplicit (raft's joint
// consensus, left automatically once committed), never while a joint
// configuration is still being left. NextVoters is pure and holds the
// rules (voters_test.go checks them on every cluster of up to six
// members): an odd count up to the target whenever one has a live
// majority; nothing while the current voters lack one; a learner is
// promoted only when its broker is registered and eligible and its log
// within promoteWithin entries of the leader's; a voter is dropped only
// when dead for VoterReplaceAfter, or above the target, or to make an
// even set odd, or when leaving (Member.Leaving, which counts as gone),
// never when dead only briefly; the leader stays. Dropped
// voters become learners. Dead for long is counted from when this
// metadata leader first saw the voter dead: a new leader starts the
// clock again, so the delay is bounded only while leadership is stable.
// The metadata leader's MetadataVoters wins, as its ELR flag does.
//
// Goroutines: Metadata's Apply, Snapshot and Restore run on group 0's
// goroutine; readers take a consistent copy with View (an atomic pointer to
// an immutable State). Metadata.mu guards only the channel Changed returns
// (lock order: the repository's DESIGN.md).
package coordinator
