package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/raftq/raftq/broker"
	"github.com/raftq/raftq/internal/logging"
)

// promptly is how soon a client command at a wrong address must fail:
// the bound for "clear errors instead of long waits".
const promptly = time.Second

// cliPromptly is cli for a command that must end within promptly.
func cliPromptly(t *testing.T, code int, stdin string, args ...string) cliResult {
	t.Helper()
	start := time.Now()
	out := cli(t, code, stdin, args...)
	if took := time.Since(start); took > promptly {
		t.Errorf("raftq %s took %s, want at most %s", strings.Join(args, " "), took.Round(time.Millisecond), promptly)
	}
	return out
}

// A producer that never reached a broker fails at once with the dial
// error, where it waited out --drain-timeout and called its records'
// fate unknown; so does a generated load.
func TestProduce_NoBrokerFailsAtOnce(t *testing.T) {
	for _, args := range [][]string{
		{"produce", "-b", "127.0.0.1:1", "nowhere"},
		{"produce", "-b", "127.0.0.1:1", "--rate", "100", "nowhere"},
	} {
		out := cliPromptly(t, 1, "one\ntwo\n", args...)
		if want := "no Kafka broker reachable at 127.0.0.1:1: unable to dial: dial tcp 127.0.0.1:1: connect: connection refused"; !strings.Contains(out.stderr, want) {
			t.Errorf("raftq %s: stderr %q, want %q", strings.Join(args, " "), out.stderr, want)
		}
		if strings.Contains(out.stderr, "unknown") {
			t.Errorf("raftq %s: stderr %q calls records of unknown fate that were never sent", strings.Join(args, " "), out.stderr)
		}
	}
}

// Every client command pointed at an admin port says so within a second
// and names the node's Kafka port, which the status document holds. Go's
// HTTP server, as the admin listener is, waits for the end of a request
// line that a Kafka frame never sends.
func TestClient_AdminPortNamesKafkaPort(t *testing.T) {
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(broker.Status{NodeID: 2, KafkaAddr: "127.0.0.1:9093"})
	}))
	t.Cleanup(admin.Close)
	addr := strings.TrimPrefix(admin.URL, "http://")
	want := addr + " is a raftq admin port (node 2), not a Kafka one; the Kafka port is 127.0.0.1:9093"
	for _, args := range [][]string{
		{"produce", "t"},
		{"consume", "t"},
		{"topic", "list"},
		{"group", "list"},
	} {
		out := cliPromptly(t, 1, "one\n", append(args, "-b", addr)...)
		if !strings.Contains(out.stderr, want) {
			t.Errorf("raftq %s: stderr %q, want %q", strings.Join(args, " "), out.stderr, want)
		}
	}
}

// An HTTP server that is not a raftq admin port is named as such rather
// than waited on.
func TestClient_OtherHTTPServer(t *testing.T) {
	other := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(other.Close)
	addr := strings.TrimPrefix(other.URL, "http://")
	out := cliPromptly(t, 1, "", "topic", "list", "-b", addr)
	if want := addr + " answers HTTP (404 Not Found), not Kafka"; !strings.Contains(out.stderr, want) {
		t.Errorf("stderr %q, want %q", out.stderr, want)
	}
}

// identify leaves a real Kafka broker alone: the fake broker hangs up on
// HTTP, as Kafka does.
func TestIdentify_KafkaBroker(t *testing.T) {
	brokers, _ := fakeThatDies(t, 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), identifyWait)
	defer cancel()
	if err := identify(ctx, nil, brokers); err != nil {
		t.Errorf("identify(%s) = %v, want nil for a Kafka broker", brokers, err)
	}
}

// cliEnv is cli with the environment variables vars.
func cliEnv(t *testing.T, vars map[string]string, code int, args ...string) cliResult {
	t.Helper()
	var stdout, stderr logging.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return vars[k] }}
	start := time.Now()
	got := run(context.Background(), e, args)
	if took := time.Since(start); took > promptly {
		t.Errorf("raftq %s took %s, want at most %s", strings.Join(args, " "), took.Round(time.Millisecond), promptly)
	}
	if got != code {
		t.Errorf("raftq %s: exit %d, want %d; stderr %q", strings.Join(args, " "), got, code, stderr.String())
	}
	return cliResult{stdout.String(), stderr.String()}
}

// RAFTQ_BROKERS and RAFTQ_ADMIN are the defaults of every client
// command's --brokers and of --admin; the flags still win. The addresses
// refuse, so each command names the one it dialled.
func TestEnv_FlagDefaults(t *testing.T) {
	vars := map[string]string{envBrokers: "127.0.0.1:1", envAdmin: "127.0.0.1:1"}
	for _, args := range [][]string{
		{"produce", "t"}, {"produce", "--rate", "1", "t"}, {"consume", "t"},
		{"topic", "create", "t"}, {"topic", "list"}, {"topic", "describe", "t"}, {"topic", "alter", "t", "-c", "retention.ms=1"}, {"topic", "delete", "t"},
		{"group", "list"}, {"group", "describe", "g"}, {"group", "reset-offsets", "g", "--topic", "t", "--to-earliest"},
		{"bench", "--duration", "1s"},
	} {
		out := cliEnv(t, vars, 1, args...)
		if want := "no Kafka broker reachable at 127.0.0.1:1:"; !strings.Contains(out.stderr, want) {
			t.Errorf("raftq %s with %s=127.0.0.1:1: stderr %q, want %q", strings.Join(args, " "), envBrokers, out.stderr, want)
		}
		out = cliEnv(t, vars, 1, append(args, "-b", "127.0.0.1:2")...)
		if want := "no Kafka broker reachable at 127.0.0.1:2:"; !strings.Contains(out.stderr, want) {
			t.Errorf("raftq %s -b 127.0.0.1:2 with %s set: stderr %q, want %q (the flag wins)", strings.Join(args, " "), envBrokers, out.stderr, want)
		}
	}
	out := cliEnv(t, vars, 1, "cluster", "status")
	if want := "node status from 127.0.0.1:1:"; !strings.Contains(out.stderr, want) {
		t.Errorf("cluster status with %s=127.0.0.1:1: stderr %q, want %q", envAdmin, out.stderr, want)
	}
	out = cliEnv(t, vars, 1, "cluster", "status", "--admin", "127.0.0.1:2")
	if want := "node status from 127.0.0.1:2:"; !strings.Contains(out.stderr, want) {
		t.Errorf("cluster status --admin 127.0.0.1:2 with %s set: stderr %q, want %q", envAdmin, out.stderr, want)
	}
}

// Kafka's not-found code reaches the user naming the topic, where its
// stock text ("This server does not host this topic-partition") named
// none. kfake, like Kafka without auto-creation, does not have the topic.
func TestClient_NoTopicNamed(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "other"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	bs := strings.Join(fake.ListenAddrs(), ",")
	const want = `topic "nosuch" does not exist`
	for _, args := range [][]string{
		{"consume", "nosuch"},
		{"consume", "nosuch", "--partition", "0"},
		{"topic", "describe", "nosuch"},
		{"topic", "delete", "nosuch"},
		{"topic", "alter", "nosuch", "-c", "retention.ms=1"},
	} {
		out := cliPromptly(t, 1, "x\n", append(args, "-b", bs)...)
		if !strings.Contains(out.stderr, want) {
			t.Errorf("raftq %s: stderr %q, want %q", strings.Join(args, " "), out.stderr, want)
		}
	}
	// kgo retries an unknown topic a few times (it may be being created)
	// before it fails the record, which takes about a second.
	if out := cli(t, 1, "x\n", "produce", "nosuch", "-b", bs); !strings.Contains(out.stderr, want) {
		t.Errorf("raftq produce nosuch: stderr %q, want %q", out.stderr, want)
	}
}
