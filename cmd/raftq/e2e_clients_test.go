package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/chaos"
	"github.com/raftq/raftq/partition"
)

// TestE2E_Clients moves records through three raftq processes with every
// Kafka client we claim to work with: franz-go (idempotent, acks=all),
// IBM/sarama (sync and async producers, idempotent, at its default and at
// its newest protocol version; partition consumer), segmentio/kafka-go
// (Writer; Reader on a partition and in a group), kcat (librdkafka:
// producer, partition consumer, group consumer) and kafkajs (admin,
// idempotent producer, group consumer; transactional producer with
// sendOffsets and a read_committed consumer) where they are installed. Each
// producer writes its own topic, which franz-go reads back and checks:
// every acknowledged record exactly once, in send order. The consumers
// read the franz-go topic and must see the same log, except kafkajs's
// (it cannot decode snappy, franz-go's default, without a plugin) and
// kcat's group member, which read their own client's topic; group
// consumers must also commit what they read.
func TestE2E_Clients(t *testing.T) { runClients(t, nil) }

// runClients is TestE2E_Clients with every topic created with tc's
// configs (an ISR mode, say) besides its own.
func runClients(t *testing.T, tc topicConfigs) {
	c := e2eCluster(t, 3)
	const parts, perPart = 3, 40

	createTopic(t, c, "kgo", parts, 3, tc.with(nil))
	cl := e2eClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	want := map[int32][]string{}
	for p := range int32(parts) {
		want[p] = seq(fmt.Sprintf("kgo-p%d", p), perPart)
		produceValues(t, cl, "kgo", p, want[p]...)
	}
	for p := range int32(parts) {
		got, _ := readPartition(t, c, "kgo", p)
		checkLog(t, fmt.Sprintf("kgo-%d", p), got, want[p], allAcked(want[p]))
	}
	if mode := tc["replication.mode"]; mode != "" {
		checkMode(t, c, "kgo", mode)
	}

	t.Run("sarama", func(t *testing.T) {
		for _, v := range []sarama.KafkaVersion{sarama.DefaultVersion, sarama.V4_0_0_0} {
			t.Run(v.String(), func(t *testing.T) {
				topic := "sarama-" + strings.ReplaceAll(v.String(), ".", "_")
				createTopic(t, c, topic, parts, 3, tc.with(nil))
				saramaProduce(t, c, v, topic, parts, perPart)
				saramaConsume(t, c, v, "kgo", want)
			})
		}
	})
	t.Run("kafka-go", func(t *testing.T) {
		createTopic(t, c, "kafkago", parts, 3, tc.with(nil))
		kafkagoProduce(t, c, "kafkago", parts, perPart)
		kafkagoConsume(t, c, "kgo", want)
		kafkagoGroupConsume(t, c, "kgo", want)
	})
	t.Run("kcat", func(t *testing.T) {
		kcatRoundTrip(t, c, want[0], tc)
	})
	t.Run("kafkajs", func(t *testing.T) {
		kafkajsRoundTrip(t, c, tc)
		t.Run("txn", func(t *testing.T) { kafkajsTxn(t, c, tc) }) // reads the round trip's topic
	})
	checkNoCrashes(t, c)
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "raftq-e2e"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	return cfg
}

// saramaProduce sends half of each partition's values with a
// SyncProducer and the other half with an AsyncProducer, then checks the
// topic's logs.
func saramaProduce(t *testing.T, c *chaos.Cluster, v sarama.KafkaVersion, topic string, parts, perPart int) {
	sent := map[int32][]string{}
	sp, err := sarama.NewSyncProducer(seeds(c), saramaConfig(v))
	if err != nil {
		t.Fatalf("sarama sync producer: %v", err)
	}
	var msgs []*sarama.ProducerMessage
	for p := range int32(parts) {
		for i := range perPart / 2 {
			val := fmt.Sprintf("%s-sync-p%d-%d", topic, p, i)
			sent[p] = append(sent[p], val)
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(val)})
		}
	}
	if err := sp.SendMessages(msgs); err != nil {
		t.Fatalf("sarama SendMessages: %v", err)
	}
	for _, m := range msgs {
		if m.Offset < 0 {
			t.Errorf("sarama sync: %v acknowledged without an offset", m.Value)
		}
	}
	if err := sp.Close(); err != nil {
		t.Errorf("close sync producer: %v", err)
	}

	ap, err := sarama.NewAsyncProducer(seeds(c), saramaConfig(v))
	if err != nil {
		t.Fatalf("sarama async producer: %v", err)
	}
	n := 0
	for p := range int32(parts) {
		for i := range perPart - perPart/2 {
			val := fmt.Sprintf("%s-async-p%d-%d", topic, p, i)
			sent[p] = append(sent[p], val)
			ap.Input() <- &sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(val)}
			n++
		}
	}
	timeout := time.After(30 * time.Second)
	for range n {
		select {
		case <-ap.Successes():
		case perr := <-ap.Errors():
			t.Fatalf("sarama async: %v", perr.Err)
		case <-timeout:
			t.Fatal("sarama async: no answer within 30s")
		}
	}
	if err := ap.Close(); err != nil {
		t.Errorf("close async producer: %v", err)
	}
	for p := range int32(parts) {
		got, _ := readPartition(t, c, topic, p)
		checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, sent[p], allAcked(sent[p]))
	}
}

// saramaConsume reads every partition of topic with sarama's partition
// consumer and compares with want.
func saramaConsume(t *testing.T, c *chaos.Cluster, v sarama.KafkaVersion, topic string, want map[int32][]string) {
	cons, err := sarama.NewConsumer(seeds(c), saramaConfig(v))
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer cons.Close()
	for p, vals := range want {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("sarama ConsumePartition %s-%d: %v", topic, p, err)
		}
		var got []string
		timeout := time.After(30 * time.Second)
		for len(got) < len(vals) {
			select {
			case m := <-pc.Messages():
				if m.Offset != int64(len(got)) {
					t.Errorf("sarama consumer %s-%d: offset %d, expected %d", topic, p, m.Offset, len(got))
				}
				got = append(got, string(m.Value))
			case cerr := <-pc.Errors():
				t.Fatalf("sarama consumer %s-%d: %v", topic, p, cerr.Err)
			case <-timeout:
				t.Fatalf("sarama consumer %s-%d: %d of %d records in 30s", topic, p, len(got), len(vals))
			}
		}
		pc.AsyncClose()
		if !slices.Equal(got, vals) {
			t.Errorf("sarama consumer %s-%d read %v, want %v", topic, p, got, vals)
		}
	}
}

func kafkagoProduce(t *testing.T, c *chaos.Cluster, topic string, parts, perPart int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(seeds(c)...),
		Topic:        topic,
		Balancer:     kafkago.BalancerFunc(func(m kafkago.Message, _ ...int) int { return m.Partition }),
		RequiredAcks: kafkago.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
		MaxAttempts:  10,
	}
	defer w.Close()
	// kafka-go's Writer sends one batch per partition per request; writing
	// one message at a time keeps the send order per partition exact.
	sent := map[int32][]string{}
	for i := range perPart {
		for p := range parts {
			val := fmt.Sprintf("kafkago-p%d-%d", p, i)
			sent[int32(p)] = append(sent[int32(p)], val)
			if err := w.WriteMessages(ctx, kafkago.Message{Partition: p, Value: []byte(val)}); err != nil {
				t.Fatalf("kafka-go write %s: %v", val, err)
			}
		}
	}
	for p := range int32(parts) {
		got, _ := readPartition(t, c, topic, p)
		checkLog(t, fmt.Sprintf("%s-%d", topic, p), got, sent[p], allAcked(sent[p]))
	}
}

func kafkagoConsume(t *testing.T, c *chaos.Cluster, topic string, want map[int32][]string) {
	for p, vals := range want {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers: seeds(c), Topic: topic, Partition: int(p),
			MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
		})
		if err := r.SetOffset(kafkago.FirstOffset); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var got []string
		for len(got) < len(vals) {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("kafka-go reader %s-%d after %d records: %v", topic, p, len(got), err)
			}
			got = append(got, string(m.Value))
		}
		cancel()
		r.Close()
		if !slices.Equal(got, vals) {
			t.Errorf("kafka-go reader %s-%d read %v, want %v", topic, p, got, vals)
		}
	}
}

// kafkagoGroupConsume reads every partition of topic as the one member
// of a kafka-go consumer group, from the beginning, committing each record
// (CommitMessages), and checks the order and the committed offsets.
func kafkagoGroupConsume(t *testing.T, c *chaos.Cluster, topic string, want map[int32][]string) {
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: seeds(c), Topic: topic, GroupID: "kafkago-group", StartOffset: kafkago.FirstOffset,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	total := 0
	for _, vals := range want {
		total += len(vals)
	}
	got := map[int32][]string{}
	for n := 0; n < total; n++ {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go group reader after %d records: %v", n, err)
		}
		p := int32(m.Partition)
		if m.Offset != int64(len(got[p])) {
			t.Fatalf("kafka-go group reader: %s-%d offset %d after %d records", topic, p, m.Offset, len(got[p]))
		}
		got[p] = append(got[p], string(m.Value))
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go commit %s-%d@%d: %v", topic, p, m.Offset, err)
		}
	}
	for p, vals := range want {
		if !slices.Equal(got[p], vals) {
			t.Errorf("kafka-go group reader %s-%d read %v, want %v", topic, p, got[p], vals)
		}
	}
	checkGroupCommitted(t, c, "kafkago-group", topic, want)
}

// kcatRoundTrip has kcat (librdkafka, idempotent) produce to a new topic,
// reads it back with kcat and franz-go, has kcat read partition 0 of
// the franz-go topic, and round-trips topics with a compression.type.
func kcatRoundTrip(t *testing.T, c *chaos.Cluster, kgoP0 []string, tc topicConfigs) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat; .ci/run installs it)")
	}
	createTopic(t, c, "kcat", 1, 3, tc.with(nil))
	base := []string{"-b", strings.Join(seeds(c), ","), "-X", "api.version.request=true"}
	vals := seq("kcat", 50)
	in := strings.Join(vals, "\n") + "\n"
	out, err := runKcat(t, kcat, in, append(base, "-P", "-t", "kcat", "-p", "0",
		"-X", "enable.idempotence=true", "-X", "acks=all")...)
	if err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	got, _ := readPartition(t, c, "kcat", 0)
	checkLog(t, "kcat-0", got, vals, allAcked(vals))

	consume := func(topic string, n int) []string {
		out, err := runKcat(t, kcat, "", append(base, "-C", "-t", topic, "-p", "0", "-o", "beginning",
			"-c", fmt.Sprint(n), "-e", "-q", "-f", "%s\n")...)
		if err != nil {
			t.Fatalf("kcat consume %s: %v\n%s", topic, err, out)
		}
		return lines(out)
	}
	if got := consume("kcat", len(vals)); !slices.Equal(got, vals) {
		t.Errorf("kcat read back %v, want %v", got, vals)
	}
	if got := consume("kgo", len(kgoP0)); !slices.Equal(got, kgoP0) {
		t.Errorf("kcat read kgo-0 as %v, want %v", got, kgoP0)
	}

	// Topics that store every batch in one codec (compression.type):
	// librdkafka reads what the broker recompressed.
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		topic := "kcat-" + codec
		createTopic(t, c, topic, 1, 3, tc.with(map[string]*string{"compression.type": &codec}))
		vals := seq(topic, 20)
		out, err := runKcat(t, kcat, strings.Join(vals, "\n")+"\n", append(base, "-P", "-t", topic, "-p", "0",
			"-X", "compression.codec=none", "-X", "acks=all")...)
		if err != nil {
			t.Fatalf("kcat produce to %s: %v\n%s", topic, err, out)
		}
		if got := consume(topic, len(vals)); !slices.Equal(got, vals) {
			t.Errorf("kcat read %s back as %v, want %v", topic, got, vals)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		hosts := hostsOf(ctx, c, topic, 0)
		cancel()
		waitReplicasEqual(t, c, topic, 0, hosts)
		n, _ := c.Node(hosts[0])
		codecs := batchCodecs(segmentBytes(t, n, topic, 0))
		if len(codecs) == 0 {
			t.Errorf("%s: no batch in node %d's log", topic, hosts[0])
		}
		for _, got := range codecs {
			if want, _ := partition.ParseCodec(codec); got != want {
				t.Errorf("%s stores a batch in codec %d, want %s (%d)", topic, got, codec, want)
			}
		}
	}

	// librdkafka's group consumer (what confluent-kafka-go and -python
	// use): join, read from the beginning, commit.
	out, err = runKcat(t, kcat, "", append(base, "-G", "kcat-group", "-o", "beginning",
		"-c", fmt.Sprint(len(vals)), "-q", "-f", "%s\n",
		"-X", "auto.commit.interval.ms=100", "kcat")...)
	if err != nil {
		t.Fatalf("kcat group consume: %v\n%s", err, out)
	}
	if got := lines(out); !slices.Equal(got, vals) {
		t.Errorf("kcat group member read %v, want %v", got, vals)
	}
	checkGroupCommitted(t, c, "kcat-group", "kcat", map[int32][]string{0: vals})
}

func runKcat(t *testing.T, kcat, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stderr.Len() > 0 {
		t.Logf("kcat %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return stdout.String(), fmt.Errorf("kcat timed out: %w", ctx.Err())
	}
	return stdout.String(), err
}

// batchCodecs lists the codec of each batch in a partition's log bytes.
func batchCodecs(log []byte) []partition.Codec {
	var out []partition.Codec
	for len(log) >= partition.BatchHeaderSize {
		size := 12 + int(binary.BigEndian.Uint32(log[8:12]))
		out = append(out, partition.Codec(binary.BigEndian.Uint16(log[21:23])&7))
		log = log[min(size, len(log)):]
	}
	return out
}
