package main

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// isrPartitions returns an ISR topic's partitions as DescribeTopicPartitions
// (KIP-966) gives them, with the ISR and the ELR that Metadata lacks; nil
// for a raft topic, or when the broker cannot say (describe then prints
// the raft table).
func isrPartitions(ctx context.Context, cl *kgo.Client, topic string) map[int32]kmsg.DescribeTopicPartitionsResponseTopicPartition {
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return nil
	}
	isr := false
	for _, c := range rc.Configs {
		isr = isr || c.Key == "replication.mode" && c.MaybeValue() == "isr"
	}
	if !isr {
		return nil
	}
	out := map[int32]kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				out[p.Partition] = p
			}
		}
		if resp.NextCursor == nil || resp.NextCursor.Topic != topic {
			return out
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: resp.NextCursor.Partition}
	}
}
