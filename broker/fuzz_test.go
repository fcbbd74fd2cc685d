package broker

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDispatch sends arbitrary request bodies, under every API key and
// version the broker serves, to a real single-node broker over TCP. Each
// must get a response or close only its own connection; afterwards the
// broker must still answer, and the partition it hosts must still hold
// exactly the record written before fuzzing.
func FuzzDispatch(f *testing.F) {
	c := newTestCluster(f, 1, func(cfg *Config) { cfg.AutoCreateTopics = true })
	cl := c.client()
	createTopic(f, cl, "fz", 1, 1)
	produceSync(f, c.client(), "fz", 0, "keep")
	addr := c.cfgs[1].KafkaAddr
	for _, a := range c.nodes[1].apis {
		req := kmsg.RequestForKey(a.Key)
		req.SetVersion(a.MaxVersion)
		f.Add(a.Key, a.MaxVersion, req.AppendTo(nil))
		req.SetVersion(a.MinVersion)
		f.Add(a.Key, a.MinVersion, req.AppendTo(nil))
	}
	f.Add(int16(0), int16(9), produceRequest("fz", 0, -1, []byte("not a batch")).AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		sendRawFrame(t, addr, key, version, body)
		alive := kmsg.NewPtrApiVersionsRequest()
		if _, ok := rawKafka(t, addr, alive).(*kmsg.ApiVersionsResponse); !ok {
			t.Fatal("broker stopped answering ApiVersions")
		}
		if hw := logOf(c.nodes[1].replicaFor("fz", 0)).HighWatermark(); hw < 1 {
			t.Fatalf("the record written before fuzzing is gone: high watermark %d", hw)
		}
	})
}

// sendRawFrame writes one request frame and reads until a response or
// the connection closes.
func sendRawFrame(t *testing.T, addr string, key, version int16, body []byte) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var hdr []byte
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(key))
	hdr = binary.BigEndian.AppendUint16(hdr, uint16(version))
	hdr = binary.BigEndian.AppendUint32(hdr, 7)
	hdr = binary.BigEndian.AppendUint16(hdr, 0xffff) // null client id
	if req := kmsg.RequestForKey(key); req != nil {
		req.SetVersion(version)
		if req.IsFlexible() && key != 18 {
			hdr = append(hdr, 0) // no header tags
		}
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	frame = append(append(frame, hdr...), body...)
	if _, err := conn.Write(frame); err != nil {
		return
	}
	// Produce with acks=0 gets no answer: wait a little, not forever.
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return // closed: a malformed request ends only its own connection
	}
	_, _ = io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(size[:])))
}
