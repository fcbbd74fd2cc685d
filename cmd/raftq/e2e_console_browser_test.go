package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/raftq/raftq/broker"
)

// chromium returns Debian's chromium (or Chrome's binary, by its other
// names), or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: the console's browser test needs Debian's chromium (apt-get install chromium; .ci/run installs it)")
	return ""
}

// headless runs chromium headless on url with args (--dump-dom,
// --screenshot=...), in a profile of its own, and returns its stdout.
// The virtual time budget lets the page's script run its refreshes.
func headless(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,1000", "--virtual-time-budget=10000"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.Bytes(), 2000))
	}
	return stdout.Bytes()
}

// statusLeaders reads every node's /v1/status and returns each partition
// of topic's leader, as the nodes that lead say.
func statusLeaders(t *testing.T, admins []string, topic string) map[int32]uint64 {
	t.Helper()
	out := map[int32]uint64{}
	for _, a := range admins {
		resp, err := http.Get("http://" + a + "/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		var s broker.Status
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.Partitions {
			if p.Topic == topic && p.Role == "leader" {
				out[p.Partition] = s.NodeID
			}
		}
	}
	return out
}

var domLeader = regexp.MustCompile(`<tr data-topic="([^"]+)" data-partition="(\d+)" data-leader="(\d+)"`)

// domLeaders reads the leaders a topic page shows.
func domLeaders(dom []byte, topic string) map[int32]uint64 {
	out := map[int32]uint64{}
	for _, m := range domLeader.FindAllSubmatch(dom, -1) {
		if string(m[1]) != topic {
			continue
		}
		p, _ := strconv.Atoi(string(m[2]))
		l, _ := strconv.ParseUint(string(m[3]), 10, 64)
		out[int32(p)] = l
	}
	return out
}

// TestE2E_ConsoleInBrowser starts `raftq dev`, fills a topic and a group,
// and loads the web console in headless Chromium: the topics and leaders
// it shows match /v1/status, its script refreshes the page in place, the
// partition page shows the records, and a screenshot is kept (under the
// test's temp dir, and in $RAFTQ_ARTIFACTS when set).
func TestE2E_ConsoleInBrowser(t *testing.T) {
	bin := chromium(t)
	d := startDev(t)
	bootstrap := strings.Split(bannerField(t, d.banner, `bootstrap servers\s+(\S+)`), ",")
	var admins []string
	for _, u := range strings.Fields(bannerField(t, d.banner, `admin\s+(.+)`)) {
		admins = append(admins, strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/"))
	}
	const topic = "browser"
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		for i := range 5 {
			r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("p%d-value-%d", p, i)),
				Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("browser-test")}}}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := cli(t, 0, "", "consume", topic, "--group", "viewers", "--max", "4", "-b", strings.Join(bootstrap, ","))
	if n := len(lines(out.stdout)); n != 4 {
		t.Fatalf("group consume printed %d records, want 4", n)
	}

	// Leaders can move between the page and the status read: look again.
	var shown, status map[int32]uint64
	for try := 0; try < 5; try++ {
		shown = domLeaders(headless(t, bin, "http://"+admins[0]+"/topics/"+topic, "--dump-dom"), topic)
		status = statusLeaders(t, admins, topic)
		if len(status) == 3 && maps.Equal(shown, status) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(status) != 3 || !maps.Equal(shown, status) {
		t.Errorf("console shows leaders %v, /v1/status says %v", shown, status)
	}

	// The overview shows what its node has applied, which may lag the
	// group's commit on a loaded machine: look again.
	var dom string
	var lacks []string
	for try := 0; try < 10; try++ {
		dom = string(headless(t, bin, "http://"+admins[0]+"/", "--dump-dom"))
		lacks = nil
		for _, want := range []string{`<tr data-topic="browser" data-partitions="3">`, `<tr data-group="viewers">`,
			`<tr data-node="1" data-alive="true" data-reached="true">`, `<tr data-node="3" data-alive="true" data-reached="true">`} {
			if !strings.Contains(dom, want) {
				lacks = append(lacks, want)
			}
		}
		if len(lacks) == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	for _, want := range lacks {
		t.Errorf("console overview in the browser lacks %q", want)
	}
	// Without JavaScript (a plain GET, as a browser with scripts off
	// gets it) the page is all there, only not refreshed.
	resp, err := http.Get("http://" + admins[2] + "/topics/" + topic)
	if err != nil {
		t.Fatal(err)
	}
	static, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := domLeaders(static, topic); len(got) != 3 {
		t.Errorf("the topic page without JavaScript shows leaders %v, want 3 partitions'", got)
	}
	// console.js counts its in-place refreshes on <body>.
	if m := regexp.MustCompile(`<body[^>]*data-refreshes="(\d+)"`).FindStringSubmatch(dom); m == nil || m[1] == "0" {
		t.Errorf("the page did not refresh itself in the browser (body: %q)", regexp.MustCompile(`<body[^>]*>`).FindString(dom))
	}
	part := string(headless(t, bin, "http://"+admins[1]+"/topics/"+topic+"/1", "--dump-dom"))
	for _, want := range []string{"p1-value-4", "p1-value-0", "browser-test", `<tr data-offset="4">`} {
		if !strings.Contains(part, want) {
			t.Errorf("partition page in the browser lacks %q", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "console.png")
	headless(t, bin, "http://"+admins[0]+"/", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %v (%d bytes)", shot, err, len(png))
	}
	t.Logf("screenshot: %s", shot)
	if dir := os.Getenv("RAFTQ_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, "console.png")
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot kept as %s", dst)
	}
}
