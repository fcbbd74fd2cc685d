package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// handler routes every Kafka API raftq serves to its file in this package.
// Every key is advertised from version 0, as Kafka 4.0 does, because
// librdkafka before 2.11 enables features only on exact version overlap;
// requests in message formats older than v2 are refused per partition.
func (n *Node) handler() kafka.Handler {
	m := kafka.NewMux()
	route := func(key, maxVersion int16, fn kafka.ServeFunc) {
		m.Handle(kafka.APIRange{Key: key, MinVersion: 0, MaxVersion: maxVersion}, n.metrics.dash.counted(n.authorized(key, fn))) // authorize_rules.go
	}
	route(kmsg.ApiVersions.Int16(), 4, n.serveApiVersions)
	route(kmsg.Metadata.Int16(), 12, n.serveMetadata)
	route(kmsg.Produce.Int16(), 12, n.serveProduce)
	route(kmsg.Fetch.Int16(), 16, n.serveFetch)
	route(kmsg.ListOffsets.Int16(), 9, n.serveListOffsets)
	route(kmsg.OffsetForLeaderEpoch.Int16(), 4, n.serveOffsetForLeaderEpoch)
	route(kmsg.InitProducerID.Int16(), 5, n.serveInitProducerID)
	route(kmsg.CreateTopics.Int16(), 7, n.serveCreateTopics)
	route(kmsg.DeleteTopics.Int16(), 6, n.serveDeleteTopics)
	route(kmsg.CreatePartitions.Int16(), 3, n.serveCreatePartitions)
	route(kmsg.DescribeConfigs.Int16(), 4, n.serveDescribeConfigs)
	route(kmsg.AlterConfigs.Int16(), 2, n.serveAlterConfigs)
	route(kmsg.IncrementalAlterConfigs.Int16(), 1, n.serveIncrementalAlterConfigs)
	route(kmsg.DescribeCluster.Int16(), 2, n.serveDescribeCluster)
	route(kmsg.DescribeLogDirs.Int16(), 4, n.serveDescribeLogDirs)
	route(kmsg.DeleteRecords.Int16(), 2, n.serveDeleteRecords)
	route(kmsg.DescribeTopicPartitions.Int16(), 0, n.serveDescribeTopicPartitions)
	route(kmsg.AlterPartitionAssignments.Int16(), 1, n.serveAlterPartitionReassignments)
	route(kmsg.ListPartitionReassignments.Int16(), 0, n.serveListPartitionReassignments)
	route(kmsg.ElectLeaders.Int16(), 2, n.serveElectLeaders)
	route(kmsg.WriteTxnMarkers.Int16(), 1, n.serveWriteTxnMarkers)
	route(kmsg.DescribeProducers.Int16(), 0, n.serveDescribeProducers)
	route(kmsg.DescribeUserSCRAMCredentials.Int16(), 0, n.serveDescribeUserScramCredentials) // scram_users.go
	route(kmsg.AlterUserSCRAMCredentials.Int16(), 0, n.serveAlterUserScramCredentials)
	route(kmsg.DescribeACLs.Int16(), 3, n.serveDescribeACLs) // acls.go
	route(kmsg.CreateACLs.Int16(), 3, n.serveCreateACLs)
	route(kmsg.DeleteACLs.Int16(), 3, n.serveDeleteACLs)
	n.routeGroups(route)
	n.routeTxns(route) // txn_coordinator.go
	n.apis = m.APIs()
	return m
}

// routeGroups is where the consumer-group APIs join the mux (files
// group_*.go and offsets_*.go). OffsetCommit and OffsetFetch stop at v9:
// v10 names topics by id only.
func (n *Node) routeGroups(route func(key, maxVersion int16, fn kafka.ServeFunc)) {
	route(kmsg.FindCoordinator.Int16(), 6, n.serveFindCoordinator)
	route(kmsg.JoinGroup.Int16(), 9, n.serveJoinGroup)
	route(kmsg.SyncGroup.Int16(), 5, n.serveSyncGroup)
	route(kmsg.Heartbeat.Int16(), 4, n.serveHeartbeat)
	route(kmsg.LeaveGroup.Int16(), 5, n.serveLeaveGroup)
	route(kmsg.OffsetCommit.Int16(), 9, n.serveOffsetCommit)
	route(kmsg.OffsetFetch.Int16(), 9, n.serveOffsetFetch)
	route(kmsg.OffsetDelete.Int16(), 0, n.serveOffsetDelete)
	route(kmsg.TxnOffsetCommit.Int16(), 3, n.serveTxnOffsetCommit) // offsets_txn.go
	route(kmsg.ListGroups.Int16(), 5, n.serveListGroups)
	route(kmsg.DescribeGroups.Int16(), 5, n.serveDescribeGroups)
	route(kmsg.DeleteGroups.Int16(), 2, n.serveDeleteGroups)
}
