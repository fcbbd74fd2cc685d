package console

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// client returns a Kafka client seeded with this node's Kafka address,
// for one page: a console kept no connection of its own, so a console
// nobody looks at holds nothing open and needs no closing with its node.
func (c *Console) client(opts ...kgo.Opt) (*kgo.Client, error) {
	kafka, _ := c.cfg.Addrs()
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kafka), kgo.DialTimeout(c.cfg.NodeTimeout), kgo.RetryTimeout(c.cfg.NodeTimeout)}, opts...)...)
}

// groupView is one consumer group.
type groupView struct {
	Name, State, Protocol string
	Coordinator           int32
	Members               []memberView
	Lag                   []lagView
	TotalLag              int64
	Err                   string
}

type memberView struct {
	ID, ClientID, Host string
	Assigned           string // topic[partitions] ...
}

type lagView struct {
	Topic       string
	Partition   int32
	Member      string // client id of the member holding it; empty when none
	Commit, End int64  // Commit -1: none
	Lag         int64  // -1: unknown
	Err         string
}

// groups describes every consumer group with its lag per partition.
func (c *Console) groups(ctx context.Context) ([]groupView, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	listed, err := adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	names := listed.Groups()
	if len(names) == 0 {
		return nil, nil
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil && len(lags) == 0 {
		return nil, fmt.Errorf("group lag: %w", err)
	}
	var out []groupView
	for _, name := range names {
		l, ok := lags[name]
		if !ok {
			out = append(out, groupView{Name: name, Err: "not described"})
			continue
		}
		out = append(out, groupOf(l))
	}
	slices.SortFunc(out, func(a, b groupView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func groupOf(l kadm.DescribedGroupLag) groupView {
	g := groupView{Name: l.Group, State: l.State, Protocol: l.Protocol, Coordinator: l.Coordinator.NodeID}
	if err := l.Error(); err != nil {
		g.Err = err.Error()
	}
	for _, m := range l.Members {
		mv := memberView{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
		if ca, ok := m.Assigned.AsConsumer(); ok && ca != nil {
			var parts []string
			for _, t := range ca.Topics {
				parts = append(parts, fmt.Sprintf("%s%v", t.Topic, t.Partitions))
			}
			mv.Assigned = strings.Join(parts, " ")
		}
		g.Members = append(g.Members, mv)
	}
	for _, ml := range l.Lag.Sorted() {
		lv := lagView{Topic: ml.Topic, Partition: ml.Partition, Commit: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
		if ml.Member != nil {
			lv.Member = ml.Member.ClientID
		}
		if ml.Err != nil {
			lv.Err = ml.Err.Error()
		}
		if ml.Lag > 0 {
			g.TotalLag += ml.Lag
		}
		g.Lag = append(g.Lag, lv)
	}
	return g
}

// recordView is one record on a partition page.
type recordView struct {
	Offset    int64
	Timestamp time.Time
	Key       preview
	Value     preview
	Headers   []headerView
}

type headerView struct {
	Key   string
	Value preview
}

// preview is the start of a key or value: text when it is printable
// UTF-8, else hex.
type preview struct {
	Text   string
	Binary bool
	Len    int
	Cut    bool
	Null   bool
}

const previewBytes = 200

func previewOf(b []byte) preview {
	if b == nil {
		return preview{Null: true}
	}
	p := preview{Len: len(b)}
	if len(b) > previewBytes {
		b, p.Cut = b[:previewBytes], true
	}
	if printable(b) {
		p.Text = string(b)
		return p
	}
	p.Binary = true
	if len(b) > previewBytes/2 {
		b, p.Cut = b[:previewBytes/2], true
	}
	p.Text = hex.EncodeToString(b)
	return p
}

func printable(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			// A rune cut by previewBytes is still text.
			return len(b) < utf8.UTFMax && utf8.RuneStart(b[0])
		}
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
		b = b[n:]
	}
	return true
}

// lastRecords reads a partition's records from start up to end (its high
// watermark) with a client of its own, until ctx ends.
func (c *Console) lastRecords(ctx context.Context, topic string, partition int32, start, end int64) ([]recordView, error) {
	if start >= end {
		return nil, nil
	}
	cl, err := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(start)}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []recordView
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		// A poll that brings nothing once some records came means the
		// rest are not there (retention moved the start, or a gap).
		pctx, cancel := context.WithTimeout(ctx, c.cfg.NodeTimeout/2)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return out, fmt.Errorf("read %s-%d from %d: %w", topic, partition, start, ctx.Err())
		}
		n := len(out)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end {
				return
			}
			rv := recordView{Offset: r.Offset, Timestamp: r.Timestamp, Key: previewOf(r.Key), Value: previewOf(r.Value)}
			for _, h := range r.Headers {
				rv.Headers = append(rv.Headers, headerView{h.Key, previewOf(h.Value)})
			}
			out = append(out, rv)
		})
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return out, fmt.Errorf("read %s-%d: %w", topic, partition, err)
		}
		if len(out) == n && n > 0 {
			break
		}
	}
	slices.Reverse(out) // newest first
	return out, nil
}
