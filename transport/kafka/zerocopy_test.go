package kafka

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fileResponse is a fake zero-copy response: a Metadata response whose
// encoded body sits in a file and is copied to the socket from there, as
// a Fetch will send segment bytes.
type fileResponse struct {
	*kmsg.MetadataResponse
	path string
	n    int
	lie  int // added to BodyLen to simulate a broken BodyWriter

	sawTCP atomic.Bool
}

func (r *fileResponse) BodyLen() int { return r.n + r.lie }

func (r *fileResponse) WriteBody(w io.Writer, prefix []byte) (int64, error) {
	_, isTCP := w.(*net.TCPConn)
	r.sawTCP.Store(isTCP)
	f, err := os.Open(r.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := w.Write(prefix)
	if err != nil {
		return int64(n), err
	}
	m, err := io.Copy(w, f) // *net.TCPConn.ReadFrom: sendfile on Linux
	return int64(n) + m, err
}

func newFileResponse(t *testing.T, resp *kmsg.MetadataResponse) *fileResponse {
	t.Helper()
	body := resp.AppendTo(nil)
	path := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return &fileResponse{MetadataResponse: resp, path: path, n: len(body)}
}

func TestServer_BodyWriterSendsFromFile(t *testing.T) {
	f := newFake()
	frs := make(chan *fileResponse, 1)
	f.serve = func(c *Conn, req *Request) Pending {
		if req.Header.CorrelationID == 2 {
			fr := newFileResponse(t, f.answer(req).(*kmsg.MetadataResponse))
			frs <- fr
			return Ready(fr)
		}
		return Ready(f.answer(req))
	}
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())

	// Encoded responses before and after the file one share the stream.
	reqs := []kmsg.Request{metadataReq(12, "before"), metadataReq(12, "from-file"), metadataReq(4, "after")}
	rc.send(1, reqs...)
	for i, req := range reqs {
		resp := rc.read(req, 1+int32(i)).(*kmsg.MetadataResponse)
		if got, want := *resp.Topics[0].Topic, *req.(*kmsg.MetadataRequest).Topics[0].Topic; got != want {
			t.Fatalf("response %d for %s, want %s", i, got, want)
		}
	}
	if fr := <-frs; !fr.sawTCP.Load() {
		t.Fatal("WriteBody did not get the *net.TCPConn, so sendfile cannot apply")
	}
}

func TestServer_BodyWriterLengthMismatchCloses(t *testing.T) {
	f := newFake()
	f.serve = func(c *Conn, req *Request) Pending {
		fr := newFileResponse(t, f.answer(req).(*kmsg.MetadataResponse))
		fr.lie = 3
		return Ready(fr)
	}
	ts := startServer(t, f, nil)
	rc := dialRaw(t, ts.Addr())
	rc.send(1, metadataReq(12, "a"))
	rc.expectClosed()
	eventually(t, "closed as a bad response", func() bool { return ts.obs.anyClosedWith(ErrBadResponse) })
}
