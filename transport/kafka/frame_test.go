package kafka

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestReadFrame(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
		body []byte
	}{
		{"ok", frameOf([]byte("12345678")), nil, []byte("12345678")},
		{"empty input", nil, io.EOF, nil},
		{"partial size", []byte{0, 0, 1}, ErrTruncated, nil},
		{"partial body", frameOf([]byte("12345678"))[:10], ErrTruncated, nil},
		{"negative", []byte{0x80, 0, 0, 0}, ErrMalformed, nil},
		{"too large", []byte{0, 0, 0x10, 1}, ErrFrameTooLarge, nil},
		{"too small", frameOf([]byte("1234567")), ErrMalformed, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(tc.in), 4096)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if !bytes.Equal(got, tc.body) {
				t.Fatalf("body %q, want %q", got, tc.body)
			}
		})
	}
}

func TestDecodeHeader_RoundTripsKmsgFormatter(t *testing.T) {
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.SetVersion(0)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	cases := []struct {
		req      kmsg.Request
		clientID *string
	}{
		{metadataReq(0, "a"), kmsg.StringPtr("c")},  // header v1
		{metadataReq(12, "a"), kmsg.StringPtr("c")}, // header v2
		{metadataReq(12, "a"), nil},                 // null client id
		{av, kmsg.StringPtr("")},                    // flexible ApiVersions
		{cs, nil},                                   // header v0, no client id
	}
	for _, tc := range cases {
		var opts []kmsg.RequestFormatterOpt
		if tc.clientID != nil {
			opts = append(opts, kmsg.FormatterClientID(*tc.clientID))
		}
		wire := kmsg.NewRequestFormatter(opts...).AppendRequest(nil, tc.req, 77)
		if tc.req.Key() == 7 && tc.req.GetVersion() == 0 {
			// kmsg's formatter stops after the correlation id here.
			wire = frameOf(append(wire[4:], tc.req.AppendTo(nil)...))
		}
		frame, err := readFrame(bytes.NewReader(wire), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		h, req, body, err := decodeHeader(frame)
		if err != nil {
			t.Fatalf("%s v%d: %v", kmsg.NameForKey(tc.req.Key()), tc.req.GetVersion(), err)
		}
		if h.Key != tc.req.Key() || h.Version != tc.req.GetVersion() || h.CorrelationID != 77 {
			t.Fatalf("header %+v", h)
		}
		if (h.ClientID == nil) != (tc.clientID == nil) || (h.ClientID != nil && *h.ClientID != *tc.clientID) {
			t.Fatalf("client id %v, want %v", h.ClientID, tc.clientID)
		}
		if err := decodeBody(h, req, body); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(req.AppendTo(nil), tc.req.AppendTo(nil)) {
			t.Fatalf("%s v%d body does not round-trip", kmsg.NameForKey(h.Key), h.Version)
		}
	}
}

func TestDecodeHeader_Errors(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"short", []byte{0, 3, 0, 1, 0, 0}, ErrMalformed},
		{"unknown key", []byte{0x7f, 0, 0, 0, 0, 0, 0, 1}, ErrUnknownKey},
		{"negative version", []byte{0, 3, 0x80, 0, 0, 0, 0, 1}, ErrMalformed},
		{"client id past end", []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 9, 'a'}, ErrMalformed},
		{"flexible tags past end", []byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 2, 1}, ErrMalformed},
	}
	for _, tc := range cases {
		if _, _, _, err := decodeHeader(tc.frame); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	var ue *UnsupportedError
	if _, _, _, err := decodeHeader([]byte{0x7f, 0, 0, 2, 0, 0, 0, 9}); !errors.As(err, &ue) || ue.Key != 0x7f00 || ue.Version != 2 || ue.CorrelationID != 9 {
		t.Fatalf("unknown key error %#v", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Addr = "" },
		func(c *Config) { c.MaxFrameBytes = 7 },
		func(c *Config) { c.MaxFrameBytes = 1 << 31 },
		func(c *Config) { c.MaxInFlight = 0 },
		func(c *Config) { c.IdleTimeout = -1 },
		func(c *Config) { c.WriteTimeout = -1 },
	}
	for i, mod := range bad {
		c := DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("bad config %d accepted", i)
		}
	}
}

func TestStart_RejectsBadAPIRanges(t *testing.T) {
	bad := [][]APIRange{
		{{Key: 999, MinVersion: 0, MaxVersion: 0}},
		{{Key: 3, MinVersion: 0, MaxVersion: 99}},
		{{Key: 3, MinVersion: 5, MaxVersion: 4}},
		{{Key: 3, MinVersion: -1, MaxVersion: 4}},
		{{Key: 3, MinVersion: 0, MaxVersion: 4}, {Key: 3, MinVersion: 0, MaxVersion: 4}},
	}
	for i, apis := range bad {
		f := newFake()
		f.apis = apis
		cfg := DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		if s, err := Start(cfg, f); err == nil {
			s.Close()
			t.Errorf("ranges %d accepted: %+v", i, apis)
		}
	}
}

func TestAPIKeys_SortedAndServerAgrees(t *testing.T) {
	ts := startServer(t, newFake(), nil)
	keys := APIKeys(ts.APIs())
	if len(keys) != len(fakeAPIs()) {
		t.Fatalf("%d keys, want %d", len(keys), len(fakeAPIs()))
	}
	for i := 1; i < len(keys); i++ {
		if keys[i-1].ApiKey >= keys[i].ApiKey {
			t.Fatalf("keys not sorted: %+v", keys)
		}
	}
	if keys[0].ApiKey != 0 || keys[0].MinVersion != 3 || keys[0].MaxVersion != 13 {
		t.Fatalf("produce advertised as %+v", keys[0])
	}
}
