package main

import (
	"context"
	"strings"
	"testing"
)

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

// raftq --help is asked for, so it exits 0 and writes to stdout; raftq
// alone is a mistake (exit 2, on stderr). Both usage lines name the
// positional arguments.
func TestRun_Help(t *testing.T) {
	for _, c := range []struct {
		args       []string
		code       int
		wantStdout bool
		want       []string
	}{
		{[]string{"--help"}, 0, true, []string{"usage: raftq COMMAND", "  produce TOPIC ", "  topic create|list|describe|alter|delete [TOPIC] "}},
		{[]string{"-h"}, 0, true, []string{"usage: raftq COMMAND"}},
		{[]string{"help"}, 0, true, []string{"usage: raftq COMMAND"}},
		{nil, 2, false, []string{"usage: raftq COMMAND"}},
		{[]string{"produce", "--help"}, 0, false, []string{"usage: raftq produce [flags] TOPIC\n", "--brokers"}},
		{[]string{"topic", "delete", "--help"}, 0, false, []string{"usage: raftq topic delete [flags] TOPIC...\n"}},
		{[]string{"topic", "list", "--help"}, 0, false, []string{"usage: raftq topic list [flags]\n"}},
	} {
		e, stdout, stderr := bufferedEnv(strings.NewReader(""))
		if got := run(context.Background(), e, c.args); got != c.code {
			t.Errorf("raftq %s: exit %d, want %d", strings.Join(c.args, " "), got, c.code)
		}
		out := stderr.String()
		if c.wantStdout {
			out = stdout.String()
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("raftq %s: output %q lacks %q", strings.Join(c.args, " "), out, w)
			}
		}
	}
}
