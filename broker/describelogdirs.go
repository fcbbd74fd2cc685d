package broker

import (
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// serveDescribeLogDirs describes the node's one log directory
// (<data-dir>/log): the size of each partition replica it holds and, from
// v4, the volume's total and usable bytes. Tools such as kafka-log-dirs
// and the Kafka UIs ask every broker for it to show topic sizes. The
// offset lag is 0: a replica's log ends at its high watermark, since it
// holds only what raft committed.
func (n *Node) serveDescribeLogDirs(_ *kafka.Conn, req *kafka.Request) kafka.Pending {
	r := req.Body.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, _ = filepath.Abs(filepath.Join(n.cfg.DataDir, "log"))
	dir.TotalBytes, dir.UsableBytes = volumeBytes(dir.Dir)
	want := wantedPartitions(r)
	byTopic := map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	for _, rep := range n.replicaList() {
		if want != nil && !want[rep.topic][rep.index] {
			continue
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		p.Partition, p.Size = rep.index, rep.size()
		byTopic[rep.topic] = append(byTopic[rep.topic], p)
	}
	for topic, parts := range byTopic {
		sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
		t := kmsg.NewDescribeLogDirsResponseDirTopic()
		t.Topic, t.Partitions = topic, parts
		dir.Topics = append(dir.Topics, t)
	}
	sort.Slice(dir.Topics, func(i, j int) bool { return dir.Topics[i].Topic < dir.Topics[j].Topic })
	resp.Dirs = append(resp.Dirs, dir)
	return kafka.Ready(resp)
}

// wantedPartitions is the partitions a request asks about, or nil for all.
func wantedPartitions(r *kmsg.DescribeLogDirsRequest) map[string]map[int32]bool {
	if r.Topics == nil {
		return nil
	}
	want := map[string]map[int32]bool{}
	for _, t := range r.Topics {
		if want[t.Topic] == nil {
			want[t.Topic] = map[int32]bool{}
		}
		for _, p := range t.Partitions {
			want[t.Topic][p] = true
		}
	}
	return want
}
