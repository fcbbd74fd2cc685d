package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2E_PythonClientsAutoCreate has kafka-python (2.0, Metadata v1, no
// AllowAutoTopicCreation field) and confluent-kafka-python (librdkafka)
// each produce to a topic nobody created, in raftq dev, and reads the
// record back with franz-go. Each client gives up after 10 s
// (testdata/python/produce.py). The clients are Debian's python3-kafka and
// python3-confluent-kafka, which .ci/run installs; a missing one skips.
// Last, a transactional confluent-kafka producer commits one
// transaction and aborts another, and a read_committed confluent
// consumer sees the committed record only.
func TestE2E_PythonClientsAutoCreate(t *testing.T) {
	clients := []struct{ name, module, pkg string }{
		{"kafka-python", "kafka", "python3-kafka"},
		{"confluent", "confluent_kafka", "python3-confluent-kafka"},
	}
	pythons := map[string]string{}
	for _, c := range clients {
		if py := pythonWith(c.module); py != "" {
			pythons[c.name] = py
		}
	}
	if len(pythons) == 0 {
		t.Skip("neither kafka-python nor confluent-kafka-python is installed (apt-get install python3-kafka python3-confluent-kafka; .ci/run installs them)")
	}
	d := startDev(t)
	bootstrap := bannerField(t, d.banner, `bootstrap servers\s+(\S+)`)
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			py, ok := pythons[c.name]
			if !ok {
				t.Skipf("%s is not installed (apt-get install %s; .ci/run installs it)", c.name, c.pkg)
			}
			topic := "auto-" + c.name
			out, err := exec.Command(py, filepath.Join("testdata", "python", "produce.py"), c.name, bootstrap, topic, "hello-"+c.name).CombinedOutput()
			if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "ack 0 0") {
				t.Fatalf("%s produce to a new topic in dev mode: %v\n%s", c.name, err, out)
			}
			if got := readOne(t, bootstrap, topic); got != "hello-"+c.name {
				t.Errorf("read back %q, want %q", got, "hello-"+c.name)
			}
		})
	}
	// librdkafka's transactions: a committed and an aborted one, then a
	// read_committed consumer sees the committed record alone.
	t.Run("confluent-transactional", func(t *testing.T) {
		py, ok := pythons["confluent"]
		if !ok {
			t.Skip("confluent-kafka-python is not installed (apt-get install python3-confluent-kafka; .ci/run installs it)")
		}
		// stdout only: librdkafka logs on stderr too.
		out, err := exec.Command(py, filepath.Join("testdata", "python", "produce.py"), "confluent-txn", bootstrap, "txn", "v").Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "read_committed=v-commit" {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("transactional confluent-kafka producer: %v\n%s%s\nwant read_committed=v-commit", err, out, stderr)
		}
	})
}

// pythonWith returns a Python 3 that imports module: Debian's first, as
// its packages install there, then the one on PATH; "" when none does.
func pythonWith(module string) string {
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, py := range cands {
		if exec.Command(py, "-c", "import "+module).Run() == nil {
			return py
		}
	}
	return ""
}

// readOne reads the first record of topic's partition 0.
func readOne(t *testing.T, bootstrap, topic string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record in %s within 30 s", topic)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return string(recs[0].Value)
		}
	}
}
