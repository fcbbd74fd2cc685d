package broker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetch_OneConsumer measures one consumer reading a 1-partition
// topic of 100 B records that sit in the page cache, on a 1-node
// in-process cluster over loopback TCP, beside two floors, alternating in
// each round so noise shows across rounds:
//
//   - path=fetch: the node's listener (Fetch reads the records into the
//     response, which the writer encodes and writes);
//   - path=tcp: a plain loopback TCP stream of the same number of bytes in
//     writes of the same size, from memory;
//   - path=tcp-sendfile: the same stream sent by sendfile from the
//     partition's segment file: the floor a zero-copy Fetch would have.
//     Zero copy was built and removed because it was no faster here
//     (BENCHMARKS.md, "Fetch: zero copy measured and removed"); a machine
//     where this path beats path=tcp is where to measure it again.
//
// shape=bulk is a consumer catching up: batches of 1,000 records and
// kgo's default limits (1 MiB per partition, 50 MiB per response), so
// about 1 MiB per fetch. shape=small is a consumer at the tail: batches
// of 10 records, one per fetch. The consumer speaks Fetch v11 on one
// connection and reads the batch headers for the next offset; it does not
// decode records. One op is one read of the whole partition; MB/s counts
// record bytes; cpu-ns/record is the process's CPU time (both ends of the
// connection), which the machine's other load disturbs less than the
// wall-clock rates.
//
//	go test ./broker -run '^$' -bench BenchmarkFetch_OneConsumer -benchtime 0.5s | benchstat -row /shape -col /path -ignore /round -
func BenchmarkFetch_OneConsumer(b *testing.B) {
	const rounds = 6
	c := newTestCluster(b, 1, nil)
	n := c.nodes[1]
	tcp := newTCPBaseline(b)
	shapes := []struct {
		name                    string
		batches, batchRecords   int
		partitionMaxBytes       int32
		topic                   string
		logBytes, perFetchBytes int64
		segment                 *os.File // the partition's one segment file
	}{
		{name: "bulk", batches: 300, batchRecords: 1000, partitionMaxBytes: 1 << 20},
		{name: "small", batches: 2000, batchRecords: 10, partitionMaxBytes: 1},
	}
	for i := range shapes {
		sh := &shapes[i]
		sh.topic = "zc-" + sh.name
		size := produceForFetch(b, c, sh.topic, sh.batches, sh.batchRecords)
		sh.logBytes = int64(sh.batches * size)
		sh.perFetchBytes = int64(size * max(1, int(sh.partitionMaxBytes)/size))
		var err error
		sh.segment, err = os.Open(filepath.Join(n.logDir(sh.topic, 0), fmt.Sprintf("%020d.log", 0)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sh.segment.Close() })
	}
	for _, sh := range shapes {
		records := sh.batches * sh.batchRecords
		consume := func(addr string) func(b *testing.B) {
			return func(b *testing.B) {
				fc := dialFetchConsumer(b, addr, sh.topic, sh.partitionMaxBytes)
				defer fc.close()
				b.SetBytes(sh.logBytes)
				b.ResetTimer()
				cpu := processCPU()
				for range b.N {
					fc.readAll(b, records, sh.logBytes)
				}
				reportRates(b, records, processCPU()-cpu)
			}
		}
		for round := range rounds {
			name := fmt.Sprintf("shape=%s/round=%d/path=", sh.name, round)
			b.Run(name+"fetch", consume(c.cfgs[1].KafkaAddr))
			stream := func(file *os.File) func(b *testing.B) {
				return func(b *testing.B) {
					b.SetBytes(sh.logBytes)
					b.ResetTimer()
					cpu := processCPU()
					for range b.N {
						tcp.copy(b, tcpAsk{total: sh.logBytes, chunk: sh.perFetchBytes, file: file})
					}
					reportRates(b, records, processCPU()-cpu)
				}
			}
			b.Run(name+"tcp", stream(nil))
			b.Run(name+"tcp-sendfile", stream(sh.segment))
		}
	}
}

// reportRates reports records/s and the process's CPU time per record
// (consumer, broker and the node's background work alike).
func reportRates(b *testing.B, records int, cpu time.Duration) {
	total := float64(b.N * records)
	b.ReportMetric(total/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/total, "cpu-ns/record")
}

// produceForFetch fills partition 0 of a new topic with batches of
// records of 100 B values, waits until they are committed, and returns the
// size of one batch.
func produceForFetch(b *testing.B, c *testCluster, topic string, batches, records int) int {
	b.Helper()
	cl := c.client()
	createTopic(b, cl, topic, 1, 1)
	values := make([]string, records)
	for i := range values {
		values[i] = fmt.Sprintf("%0100d", i)
	}
	batch := testBatch(b, -1, 0, 0, values...)
	for range batches {
		resp, err := cl.Broker(1).Request(testCtx(b), produceRequest(topic, 0, -1, batch))
		if err != nil {
			b.Fatal(err)
		}
		if code, _ := produceCode(resp); code != 0 {
			b.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
	}
	l := c.nodes[1].replicaFor(topic, 0).data.repl.Log()
	eventually(b, "every batch committed", func() bool { return l.HighWatermark() == int64(batches*records) })
	return len(batch)
}

// fetchConsumer is a raw Fetch v11 consumer of partition 0 of one topic.
type fetchConsumer struct {
	c     net.Conn
	br    *bufio.Reader
	topic string
	max   int32 // partition max bytes
	rf    *kmsg.RequestFormatter
	req   []byte
	body  []byte
	corr  int32
}

func dialFetchConsumer(b *testing.B, addr, topic string, partitionMaxBytes int32) *fetchConsumer {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	return &fetchConsumer{c: c, br: bufio.NewReaderSize(c, 64<<10), topic: topic, max: partitionMaxBytes, rf: kmsg.NewRequestFormatter()}
}

func (fc *fetchConsumer) close() { _ = fc.c.Close() }

// readAll reads the partition from offset 0 to records, checking that it
// got every record and wantBytes record bytes.
func (fc *fetchConsumer) readAll(b *testing.B, records int, wantBytes int64) {
	var offset, got int64
	n := 0
	for offset < int64(records) {
		recs, size, next := fc.fetch(b, offset)
		if next <= offset {
			b.Fatalf("fetch at %d returned nothing", offset)
		}
		offset, got, n = next, got+size, n+recs
	}
	if got != wantBytes || n != records {
		b.Fatalf("read %d records in %d bytes, want %d in %d", n, got, records, wantBytes)
	}
}

// fetch returns the records and record bytes at offset, and the offset
// after them.
func (fc *fetchConsumer) fetch(b *testing.B, offset int64) (int, int64, int64) {
	req := fetchRequest(fc.topic, 0, offset, -1)
	req.MinBytes, req.MaxBytes = 1, 50<<20
	req.Topics[0].Partitions[0].PartitionMaxBytes = fc.max
	fc.corr++
	fc.req = fc.rf.AppendRequest(fc.req[:0], req, fc.corr)
	if _, err := fc.c.Write(fc.req); err != nil {
		b.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(fc.br, size[:]); err != nil {
		b.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if cap(fc.body) < n {
		fc.body = make([]byte, n)
	}
	fc.body = fc.body[:n]
	if _, err := io.ReadFull(fc.br, fc.body); err != nil {
		b.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if err := resp.ReadFrom(fc.body[4:]); err != nil {
		b.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		b.Fatalf("fetch at %d: %v", offset, kerr.ErrorForCode(p.ErrorCode))
	}
	recs, next := 0, offset
	for rb := p.RecordBatches; len(rb) > 0; {
		bl := 12 + int(binary.BigEndian.Uint32(rb[8:12]))
		base, lastDelta := int64(binary.BigEndian.Uint64(rb[0:8])), int64(binary.BigEndian.Uint32(rb[23:27]))
		recs += int(binary.BigEndian.Uint32(rb[57:61]))
		next = base + lastDelta + 1
		rb = rb[bl:]
	}
	return recs, int64(len(p.RecordBatches)), next
}

// tcpBaseline is a loopback TCP connection whose far end writes what it is
// asked to from memory.
type tcpBaseline struct {
	c    net.Conn
	asks chan tcpAsk
	buf  []byte
}

// tcpAsk is total bytes in writes of chunk bytes, from memory or, when
// file is set, by sendfile from it.
type tcpAsk struct {
	total, chunk int64
	file         *os.File
}

func newTCPBaseline(b *testing.B) *tcpBaseline {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	t := &tcpBaseline{asks: make(chan tcpAsk)}
	src := []byte(strings.Repeat("x", 1<<20))
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		for ask := range t.asks {
			for pos := int64(0); pos < ask.total; pos += ask.chunk {
				n := min(ask.total-pos, ask.chunk)
				if ask.file != nil {
					_, err = s.(*net.TCPConn).ReadFrom(io.NewSectionReader(ask.file, pos, n)) // sendfile
				} else {
					_, err = s.Write(src[:n])
				}
				if err != nil {
					return
				}
			}
		}
	}()
	t.c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { close(t.asks); _ = t.c.Close() })
	return t
}

// copy has the far end send what ask says and reads it.
func (t *tcpBaseline) copy(b *testing.B, ask tcpAsk) {
	t.asks <- ask
	total, chunk := ask.total, ask.chunk
	if int64(len(t.buf)) < chunk {
		t.buf = make([]byte, chunk)
	}
	for left := total; left > 0; left -= chunk {
		if _, err := io.ReadFull(t.c, t.buf[:min(left, chunk)]); err != nil {
			b.Fatal(err)
		}
	}
}
