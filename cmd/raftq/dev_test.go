package main

import (
	"strings"
	"testing"
)

func TestDevBanner_String(t *testing.T) {
	b := devBanner{kafka: []string{"127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"},
		admin: []string{"127.0.0.1:9644", "127.0.0.1:9645", "127.0.0.1:9646"}, dir: "/tmp/d", temp: true, self: "raftq"}
	for _, auto := range []bool{true, false} {
		b.autoCreate = auto
		got := b.String()
		if says := strings.Contains(got, "created on first use"); says != auto {
			t.Errorf("auto-create %v: banner says topics are created on first use: %v\n%s", auto, says, got)
		}
		if !auto && !strings.Contains(got, "create topics first") {
			t.Errorf("auto-create off: banner does not say to create topics first:\n%s", got)
		}
		// Without -e kcat waits for more records and never exits.
		if want := "kcat -b 127.0.0.1:9092 -t demo -C -e\n"; !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
		for _, want := range []string{"data in /tmp/d (removed on exit)", "bootstrap servers   127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094",
			"admin               http://127.0.0.1:9644/ http://127.0.0.1:9645/ http://127.0.0.1:9646/",
			"raftq consume demo --brokers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094", "raftq cluster status --admin 127.0.0.1:9644",
			`kgo.SeedBrokers("127.0.0.1:9092")`,
			"\n  export RAFTQ_BROKERS=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094 RAFTQ_ADMIN=127.0.0.1:9644\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("banner lacks %q:\n%s", want, got)
			}
		}
	}
}
