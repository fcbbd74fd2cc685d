package groups

import (
	"maps"
	"slices"
	"sort"
)

// OffsetsTopic is the internal topic whose partitions hold group state and
// committed offsets; each partition is a raft group.
const OffsetsTopic = "__consumer_offsets"

// Phase is the replicated part of a group's state. PreparingRebalance is
// replicated only when members were removed (a leave or a session expiry):
// a new coordinator must then finish that rebalance. A rebalance started
// by a join is soft state: the joiner rejoins after a failover anyway.
type Phase string

// Group phases, named as Kafka's DescribeGroups reports them.
const (
	PhaseEmpty       Phase = "Empty"
	PhasePreparing   Phase = "PreparingRebalance"
	PhaseCompleting  Phase = "CompletingRebalance"
	PhaseStable      Phase = "Stable"
	PhaseDead        Phase = "Dead"
	maxOffsetMetaLen       = 4096 // Kafka's offset.metadata.max.bytes
)

// Protocol is one assignment protocol a member supports, with its metadata.
type Protocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata,omitempty"`
}

// Member is one member of a group's current generation.
type Member struct {
	ID                 string     `json:"id"`
	InstanceID         string     `json:"instance_id,omitempty"` // static membership; "" for dynamic
	ClientID           string     `json:"client_id,omitempty"`
	ClientHost         string     `json:"client_host,omitempty"`
	SessionTimeoutMs   int32      `json:"session_timeout_ms"`
	RebalanceTimeoutMs int32      `json:"rebalance_timeout_ms"`
	Protocols          []Protocol `json:"protocols"`
	Assignment         []byte     `json:"assignment,omitempty"`
}

// metadataFor returns the member's metadata for protocol name.
func (m *Member) metadataFor(name string) ([]byte, bool) {
	for _, p := range m.Protocols {
		if p.Name == name {
			return p.Metadata, true
		}
	}
	return nil, false
}

// supports reports whether the member lists protocol name.
func (m *Member) supports(name string) bool {
	_, ok := m.metadataFor(name)
	return ok
}

func (m *Member) clone() *Member {
	c := *m
	c.Protocols = slices.Clone(m.Protocols)
	return &c
}

// Offset is one committed offset.
type Offset struct {
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
	// CommitMs is the proposing coordinator's clock at the commit; expiry
	// is judged against it, never against a replica's own clock.
	CommitMs int64 `json:"commit_ms"`
	// Index is the raft index of the entry that wrote the offset: a
	// transaction's offsets replace a committed one only if they were
	// written after it (Kafka's CommitRecordMetadataAndOffset.olderThan).
	Index uint64 `json:"index,omitempty"`
}

// ProducerSeen is the latest epoch of a producer id that committed
// transactional offsets to an offsets partition, and when (entry time)
// it was last seen; it is forgotten OffsetsRetention after, once nothing
// of it is pending (Kafka expires producer state alike).
type ProducerSeen struct {
	Epoch  int16 `json:"epoch"`
	LastMs int64 `json:"last_ms"`
}

// PendingTxn is one producer's transactional offsets in one group,
// waiting for the transaction's marker.
type PendingTxn struct {
	ProducerEpoch int16                     `json:"producer_epoch"`
	Offsets       map[TopicPartition]Offset `json:"-"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Group is the replicated state of one group. A *Group reachable from a
// Machine is never modified; apply replaces it with a changed copy. Its
// offsets live apart (Machine.offsets), because they change on every
// commit and may be many.
type Group struct {
	Name         string             `json:"name"`
	Phase        Phase              `json:"phase"`
	ProtocolType string             `json:"protocol_type,omitempty"`
	Protocol     string             `json:"protocol,omitempty"`
	Generation   int32              `json:"generation"`
	Leader       string             `json:"leader,omitempty"`
	Members      map[string]*Member `json:"members,omitempty"`
	// EmptySinceMs is when the group last became empty (entry time).
	EmptySinceMs int64 `json:"empty_since_ms,omitempty"`
}

func (g *Group) clone() *Group {
	c := *g
	c.Members = make(map[string]*Member, len(g.Members))
	for id, m := range g.Members {
		c.Members[id] = m
	}
	return &c
}

// MemberIDs returns the member ids, sorted.
func (g *Group) MemberIDs() []string {
	ids := slices.Collect(maps.Keys(g.Members))
	sort.Strings(ids)
	return ids
}

// StaticMember returns the id of the member with instance id inst.
func (g *Group) StaticMember(inst string) (string, bool) {
	if inst == "" {
		return "", false
	}
	for id, m := range g.Members {
		if m.InstanceID == inst {
			return id, true
		}
	}
	return "", false
}

// maxRebalanceTimeoutMs is the largest rebalance timeout of the members.
func (g *Group) maxRebalanceTimeoutMs() int32 {
	var t int32
	for _, m := range g.Members {
		t = max(t, m.RebalanceTimeoutMs)
	}
	return t
}
