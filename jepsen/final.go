package jepsen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// finalReadParallelism bounds the partitions read at once.
const finalReadParallelism = 4

// FinalReads reads every partition from offset 0 to its high watermark,
// each as one final-read op of a new process. Call it after the faults are
// healed. A partition read in full is ok; one that runs out of time is
// info and keeps what it read.
func (w *Workload) FinalReads(ctx context.Context) {
	sem := make(chan struct{}, finalReadParallelism)
	var wg sync.WaitGroup
	for p := range w.cfg.Partitions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w.finalRead(ctx, p)
		}()
	}
	wg.Wait()
}

func (w *Workload) finalRead(ctx context.Context, p int32) {
	tp := TP{w.cfg.Topic, p}
	inv := w.rec.Invoke(Op{Process: w.newProcess(), F: FFinalRead, Reads: []PartitionRead{{
		Topic: tp.Topic, Partition: p, Records: []Record{}, HighWatermark: NoOffset,
	}}})
	fctx, cancel := context.WithTimeout(ctx, w.cfg.FinalReadTimeout)
	defer cancel()
	recs, hw, err := w.readAll(fctx, tp)
	comp := inv.Completion(OK)
	comp.Reads = []PartitionRead{{Topic: tp.Topic, Partition: p, Records: recs, HighWatermark: hw}}
	if err != nil {
		comp.Type, comp.Error = Info, err.Error()
		comp.Reads[0].HighWatermark = NoOffset
	}
	w.rec.Complete(comp)
	w.log.Info("final read", "partition", p, "records", len(recs), "hw", hw, "err", err)
}

// readAll consumes tp from 0 until it has read below a high watermark that
// did not move between two listings, and returns the records below it.
//
// With ReadCommitted the read is read_committed and keeps control records
// (commit and abort markers) only to know where it is: they take offsets,
// the last ones below the high watermark may be markers, and kgo returns
// no record at them otherwise. A read_committed fetch serves nothing at or
// past the last stable offset, so having been served up to the high
// watermark (a data record or a marker at hw-1) means every transaction
// below it was decided and every committed record below it was returned;
// aborted ones kgo drops with the fetch's aborted-transaction list.
func (w *Workload) readAll(ctx context.Context, tp TP) ([]Record, int64, error) {
	cl, err := w.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxWait(w.cfg.FetchMaxWait),
		w.isolation(),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, NoOffset, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	recs := []Record{}
	next := int64(0)
	for {
		hw, err := endOffset(ctx, adm, tp)
		if err != nil {
			return recs, NoOffset, err
		}
		if next >= hw {
			return below(recs, hw), hw, nil
		}
		if recs, next, err = pollUntil(ctx, cl, tp, recs, next, hw); err != nil {
			return recs, NoOffset, err
		}
	}
}

// below keeps the records under hw; ones above it landed after the listing.
func below(recs []Record, hw int64) []Record {
	out := recs[:0]
	for _, r := range recs {
		if r.Offset < hw {
			out = append(out, r)
		}
	}
	return out
}

// endOffset lists tp's high watermark, retrying while the cluster recovers.
func endOffset(ctx context.Context, adm *kadm.Client, tp TP) (int64, error) {
	for {
		offs, err := adm.ListEndOffsets(ctx, tp.Topic)
		if err == nil {
			o, ok := offs.Lookup(tp.Topic, tp.Partition)
			switch {
			case !ok:
				err = fmt.Errorf("list end offsets: %s missing", tp)
			case o.Err != nil:
				err = o.Err
			default:
				return o.Offset, nil
			}
		}
		select {
		case <-ctx.Done():
			return NoOffset, fmt.Errorf("list end offset of %s: %w", tp, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pollUntil polls until a record at or past hw-1 arrives. Control records
// move the position but are not kept.
func pollUntil(ctx context.Context, cl *kgo.Client, tp TP, recs []Record, next, hw int64) ([]Record, int64, error) {
	for next < hw {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return recs, next, fmt.Errorf("read %s: at offset %d of %d: %w", tp, next, hw, err)
		}
		if fetches.IsClientClosed() {
			return recs, next, fmt.Errorf("read %s: %w", tp, kgo.ErrClientClosed)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				recs = append(recs, Record{Offset: r.Offset, Value: string(r.Value)})
			}
			next = max(next, r.Offset+1)
		})
	}
	return recs, next, nil
}
