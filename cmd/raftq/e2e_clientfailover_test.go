package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/raftq/raftq/chaos"
)

// Other clients through a leader kill. Each test runs a client's
// idempotent producer (acks=all, one request in flight) against the one
// partition of a topic, five records a send, and kills -9 the partition's
// leader after 100 acknowledged sends, holding the client back until the
// kill is done so that its next send meets it. The client must carry on
// by its own retries, and every send's records must land once, at the
// offsets the client was told: a request the old leader committed but did
// not answer, retried to the new one, gets its original offset back.

// killLeaderUnderClient reads a client's "ack FIRST BASEOFFSET" lines from
// acks, kills the leader of topic-0 after the 100th (the client then
// waits), calls resume, and returns every line once acks is closed and
// wait, which ends the client, returns.
func killLeaderUnderClient(ctx context.Context, t *testing.T, c *chaos.Cluster, topic string, acks <-chan string, resume func(), wait func() error) []string {
	t.Helper()
	var got []string
	for len(got) < 100 {
		l, ok := <-acks
		if !ok {
			t.Fatalf("the client stopped after %d requests: %v", len(got), wait())
		}
		got = append(got, l)
	}
	victim := partitionLeader(t, c, topic, 0)
	t.Logf("kill -9 node %d, leader of %s-0, after %d acknowledged requests", victim, topic, len(got))
	if err := c.Kill(ctx, victim); err != nil {
		t.Fatal(err)
	}
	resume()
	for l := range acks {
		got = append(got, l)
	}
	if err := wait(); err != nil {
		t.Fatalf("the client after the kill, %d requests acknowledged: %v", len(got), err)
	}
	if next := partitionLeader(t, c, topic, 0); next == victim {
		t.Fatalf("node %d still leads after its kill", victim)
	}
	return got
}

// checkClientFailover checks that request i was told offset 5i and that
// topic-0 holds vals once each, in order.
func checkClientFailover(t *testing.T, c *chaos.Cluster, topic string, got, vals []string) {
	t.Helper()
	for i, l := range got {
		if want := fmt.Sprintf("ack %d %d", 5*i, 5*i); l != want {
			t.Fatalf("request %d answered %q, want %q", i, l, want)
		}
	}
	if len(got) != len(vals)/5 {
		t.Fatalf("%d requests acknowledged, want %d", len(got), len(vals)/5)
	}
	log, _ := readPartition(t, c, topic, 0)
	checkLog(t, topic+"-0", log, vals, allAcked(vals))
	checkNoCrashes(t, c)
}

// TestE2E_SaramaLeaderKill runs IBM/sarama's idempotent SyncProducer
// (SendMessages, five records a call, which sarama may split over
// requests) through a leader kill.
func TestE2E_SaramaLeaderKill(t *testing.T) { runSaramaLeaderKill(t, nil) }

// runSaramaLeaderKill is TestE2E_SaramaLeaderKill on a topic created with
// tc's configs.
func runSaramaLeaderKill(t *testing.T, tc topicConfigs) {
	c := e2eCluster(t, 3)
	const topic, count = "sarama-failover", 2000
	createTopic(t, c, topic, 1, 3, tc.with(nil))
	if mode := tc["replication.mode"]; mode != "" {
		checkMode(t, c, topic, mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := saramaConfig(sarama.V4_0_0_0)
	cfg.Producer.Retry.Max = 50 // at 100 ms apart: 5 s, for an election
	sp, err := sarama.NewSyncProducer(seeds(c), cfg)
	if err != nil {
		t.Fatalf("sarama sync producer: %v", err)
	}
	t.Cleanup(func() { _ = sp.Close() })
	vals := seq("sarama", count)
	acks := make(chan string, count)
	done := make(chan error, 1)
	killed, stop := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop) }) // a test that fails before the kill ends the sender
	go func() {
		defer close(acks)
		for i := 0; i < count; i += 5 {
			if i == 5*100 {
				select {
				case <-killed:
				case <-stop:
					done <- errors.New("the test ended before the kill")
					return
				}
			}
			msgs := make([]*sarama.ProducerMessage, 5)
			for j := range msgs {
				msgs[j] = &sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(vals[i+j])}
			}
			if err := sp.SendMessages(msgs); err != nil {
				done <- fmt.Errorf("SendMessages %d: %w", i, err)
				return
			}
			acks <- fmt.Sprintf("ack %d %d", i, msgs[0].Offset)
		}
		done <- nil
	}()
	got := killLeaderUnderClient(ctx, t, c, topic, acks, func() { close(killed) }, func() error {
		err := <-done
		done <- err // wait may be asked twice
		return err
	})
	checkClientFailover(t, c, topic, got, vals)
}
