package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	kind := flag.String("store", "files", "files or badger")
	dir := flag.String("dir", "", "data directory (created; required)")
	mode := flag.String("mode", "restart", "restart, crash (populate, exit unclosed), reopen (one timed open), idle or load")
	n := flag.Int("partitions", 1000, "partitions")
	size := flag.Int("size", 256, "bytes of state per partition")
	rate := flag.Int("rate", 1000, "load: updates per second over all partitions (0: as fast as possible)")
	writers := flag.Int("writers", 16, "load: concurrent writers")
	d := flag.Duration("d", 10*time.Second, "idle and load: how long")
	runs := flag.Int("runs", 5, "restart: runs")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "statebench: -dir is required")
		os.Exit(2)
	}
	var err error
	switch *mode {
	case "restart":
		err = runRestart(*kind, *dir, *n, *size, *runs)
	case "crash":
		_, err = populate(*kind, *dir, *n, *size)
		if err == nil {
			fmt.Printf("%s crash: populated, exiting without a close\n", *kind)
			os.Exit(0) // the point: no Close, as a kill -9 would leave it
		}
	case "reopen":
		err = timeOpen(*kind, *dir, *n, *size)
	case "idle":
		err = runIdle(*kind, *dir, *n, *size, *d)
	case "load":
		err = runLoad(*kind, *dir, *n, *size, *rate, *writers, *d)
	default:
		err = fmt.Errorf("statebench: unknown -mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// populate opens the store and gives every partition a state.
func populate(kind, dir string, n, size int) (store, error) {
	s, err := open(kind, dir, n)
	if err != nil {
		return nil, err
	}
	v := make([]byte, size)
	for p := range n {
		if err := s.Put(p, v); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// runRestart times opening the store and reading all n states, after a
// clean close, runs times (page cache warm).
func runRestart(kind, dir string, n, size, runs int) error {
	s, err := populate(kind, dir, n, size)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	var took []time.Duration
	for range runs {
		began := time.Now()
		s, err := open(kind, dir, n)
		if err != nil {
			return err
		}
		bytes, err := s.ReadAll(n)
		if err != nil {
			return err
		}
		took = append(took, time.Since(began))
		if err := s.Close(); err != nil {
			return err
		}
		if bytes != n*size {
			return fmt.Errorf("statebench: read %d bytes, want %d", bytes, n*size)
		}
	}
	slices.Sort(took)
	fmt.Printf("%s restart: %d partitions, open+read all: median %v, min %v, max %v (%d runs)\n",
		kind, n, took[len(took)/2], took[0], took[len(took)-1], runs)
	return nil
}

// timeOpen times one open and read of all n states of an existing store.
func timeOpen(kind, dir string, n, size int) error {
	began := time.Now()
	s, err := open(kind, dir, n)
	if err != nil {
		return err
	}
	bytes, err := s.ReadAll(n)
	if err != nil {
		return err
	}
	took := time.Since(began)
	if bytes != n*size {
		return fmt.Errorf("statebench: read %d bytes, want %d", bytes, n*size)
	}
	fmt.Printf("%s reopen: %d partitions, open+read all: %v\n", kind, n, took)
	return s.Close()
}

// runIdle opens a populated store and does nothing for d: the fsyncs in
// that time are the store's own (count them with strace).
func runIdle(kind, dir string, n, size int, d time.Duration) error {
	s, err := populate(kind, dir, n, size)
	if err != nil {
		return err
	}
	fmt.Printf("%s idle: populated, idle for %v from %s\n", kind, d, time.Now().Format("15:04:05.000000"))
	time.Sleep(d) // the measurement is of doing nothing for d
	fmt.Printf("%s idle: closing at %s\n", kind, time.Now().Format("15:04:05.000000"))
	return s.Close()
}

// runLoad updates partitions round-robin at rate per second (0: flat
// out) with writers goroutines for d, and reports the rate achieved and
// the latency of one durable update.
func runLoad(kind, dir string, n, size, rate, writers int, d time.Duration) error {
	s, err := populate(kind, dir, n, size)
	if err != nil {
		return err
	}
	defer s.Close()
	tokens := make(chan struct{}, 1<<16)
	stop := make(chan struct{})
	go pace(tokens, stop, rate)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	lat := make([][]time.Duration, writers)
	var wg sync.WaitGroup
	began := time.Now()
	fmt.Printf("%s load: from %s\n", kind, began.Format("15:04:05.000000"))
	deadline := began.Add(d)
	for w := range writers {
		wg.Go(func() {
			v := make([]byte, size)
			for time.Now().Before(deadline) {
				select {
				case <-tokens:
				case <-time.After(time.Until(deadline)):
					return
				}
				p := int(next.Add(1)-1) % n
				v[0]++
				t0 := time.Now()
				if err := s.Put(p, v); err != nil {
					failed.Store(&err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	close(stop)
	elapsed := time.Since(began)
	fmt.Printf("%s load: to %s\n", kind, time.Now().Format("15:04:05.000000"))
	if e := failed.Load(); e != nil {
		return *e
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return fmt.Errorf("statebench: no update finished")
	}
	fmt.Printf("%s load: target %d/s, %d writers: %d updates in %v = %.0f/s; latency p50 %v p99 %v max %v; backlog %d\n",
		kind, rate, writers, len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(),
		all[len(all)/2], all[len(all)*99/100], all[len(all)-1], len(tokens))
	return nil
}

// pace hands out rate tokens a second, in 1 ms steps; rate 0 keeps the
// channel full.
func pace(tokens chan<- struct{}, stop <-chan struct{}, rate int) {
	if rate == 0 {
		for {
			select {
			case tokens <- struct{}{}:
			case <-stop:
				return
			}
		}
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	began, sent := time.Now(), 0
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			due := int(now.Sub(began).Seconds() * float64(rate))
			for ; sent < due; sent++ {
				select {
				case tokens <- struct{}{}:
				default: // backlog full: the store cannot keep up
				}
			}
		}
	}
}
