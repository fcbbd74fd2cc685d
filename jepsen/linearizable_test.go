package jepsen

import (
	"fmt"
	"testing"
)

func TestLogState_UpToFindsEveryPrefix(t *testing.T) {
	var s *logState
	var nodes []*logState
	for i := range 300 {
		s = s.push(fmt.Sprint(i))
		nodes = append(nodes, s)
	}
	for n := int64(1); n <= 300; n++ {
		got := s.upTo(n)
		if got != nodes[n-1] || got.value != fmt.Sprint(n-1) {
			t.Fatalf("upTo(%d) = %v", n, got)
		}
	}
	if s.upTo(0) != nil || s.upTo(301) != nil {
		t.Fatal("upTo out of range")
	}
}

func TestLinReadOut_Holds(t *testing.T) {
	var s *logState
	for _, v := range []string{"a", "b", "c", "d"} {
		s = s.push(v)
	}
	cases := []struct {
		out  linReadOut
		want bool
	}{
		{linReadOut{recs: []Record{{1, "b"}, {2, "c"}}, minLen: 3, exact: NoOffset}, true},
		{linReadOut{recs: []Record{{1, "x"}}, minLen: 2, exact: NoOffset}, false},
		{linReadOut{recs: []Record{{3, "d"}}, minLen: 5, exact: NoOffset}, false},
		{linReadOut{recs: []Record{{0, "a"}, {3, "d"}}, minLen: 4, exact: 4}, true},
		{linReadOut{recs: nil, minLen: 0, exact: 3}, false},
		{linReadOut{recs: []Record{{2, "c"}, {2, "z"}}, minLen: 3, exact: NoOffset}, false},
	}
	for i, c := range cases {
		if got := c.out.holds(s); got != c.want {
			t.Errorf("case %d: holds %v, want %v", i, got, c.want)
		}
	}
}

func TestLogsEqual(t *testing.T) {
	var a, b *logState
	for _, v := range []string{"x", "y"} {
		a, b = a.push(v), b.push(v)
	}
	if !logsEqual(a, b) || logsEqual(a, b.push("z")) || logsEqual(a.prev.push("q"), a) {
		t.Fatal("logsEqual")
	}
}
