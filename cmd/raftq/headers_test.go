package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Every record produce sends carries each --header, and consume --format
// full prints them between the timestamp and the key as Kafka's console
// consumer does with print.headers. A value may hold '=' (only the first
// splits) and a header may repeat, as Kafka allows.
func TestProduce_Headers(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "h"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	bs := strings.Join(fake.ListenAddrs(), ",")
	cli(t, 0, "a\nb\n", "produce", "h", "--header", "trace=x=1", "--header", "src=cli", "--key", "k", "-b", bs)
	cli(t, 0, "c\n", "produce", "h", "-b", bs)
	out := cli(t, 0, "", "consume", "h", "--format", "full", "-b", bs)
	want := regexp.MustCompile(`^0\t0\tCreateTime:\d{13}\ttrace:x=1,src:cli\tk\ta\n` +
		`0\t1\tCreateTime:\d{13}\ttrace:x=1,src:cli\tk\tb\n` +
		`0\t2\tCreateTime:\d{13}\tNO_HEADERS\t\tc\n$`)
	if !want.MatchString(out.stdout) {
		t.Errorf("consume --format full printed %q, want it to match %s", out.stdout, want)
	}
	if out := cli(t, 0, "", "consume", "h", "-b", bs); out.stdout != "a\nb\nc\n" {
		t.Errorf("consume printed %q, want the values alone", out.stdout)
	}
}

// A --header without '=' or without a key is a usage error naming the
// flag, before any broker is dialled (the address refuses).
func TestProduce_MalformedHeader(t *testing.T) {
	for _, h := range []string{"nokey", "=v"} {
		out := cliPromptly(t, 2, "x\n", "produce", "h", "--header", h, "-b", "127.0.0.1:1")
		if want := `--header "` + h + `": want key=value`; !strings.Contains(out.stderr, want) {
			t.Errorf("--header %s: stderr %q, want %q", h, out.stderr, want)
		}
	}
}
