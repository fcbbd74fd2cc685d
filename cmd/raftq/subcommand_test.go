package main

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 records"}, {1, "1 record"}, {2, "2 records"}} {
		if got := count(c.n, "record"); got != c.want {
			t.Errorf("count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestStatusURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9644":          "http://127.0.0.1:9644/v1/status",
		"http://127.0.0.1:9644/":  "http://127.0.0.1:9644/v1/status",
		"https://node1:9644":      "https://node1:9644/v1/status",
		"http://node1:9644/admin": "http://node1:9644/admin/v1/status",
	} {
		if got := statusURL(in); got != want {
			t.Errorf("statusURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Kafka prints a topic id as URL-safe base64 without padding
// (org.apache.kafka.common.Uuid.toString).
func TestKafkaUUID(t *testing.T) {
	id := [16]byte{0xfb, 0xff, 0xbf, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if got, want := kafkaUUID(id), "-_-_AAECAwQFBgcICQoLDA"; got != want {
		t.Errorf("kafkaUUID = %q, want %q", got, want)
	}
}

func TestSelfCommand(t *testing.T) {
	for arg0, want := range map[string]string{
		"/tmp/go-build1234/b001/exe/raftq": "go run ./cmd/raftq",
		"./raftq":                          "./raftq",
		"raftq":                            "raftq",
		"/usr/local/bin/raftq":             "/usr/local/bin/raftq",
	} {
		if got := selfCommand(arg0); got != want {
			t.Errorf("selfCommand(%q) = %q, want %q", arg0, got, want)
		}
	}
}
