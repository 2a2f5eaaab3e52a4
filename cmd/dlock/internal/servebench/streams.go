package servebench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/internal/benchwork"
)

// openConcurrency bounds the streams being opened at once (each needs a
// new connection), so that a thousand dials do not overflow the accept
// backlog.
const openConcurrency = 64

// endGrace is how long the streams may take to close after their event.
const endGrace = 5 * time.Second

// runStreams holds cfg.SSEStreams leases, opens their events streams,
// then ends them (half released, half force-released) and measures how
// fast each stream hears of it.
func runStreams(ctx context.Context, s *server, cfg Config, prefix string) (Streams, error) {
	n := cfg.SSEStreams
	if err := ensureFDs(uint64(2*n + 4*cfg.Goroutines + 256)); err != nil {
		return Streams{}, err
	}
	r := Streams{Streams: n}
	leases := make([]lease, n)
	start := time.Now()
	err := parallel(ctx, cfg.Goroutines, n, func(ctx context.Context, i int) (err error) {
		leases[i], err = s.api.acquire(ctx, prefix+strconv.Itoa(i), cfg.TTL, 0, "servebench/sse")
		return err
	})
	r.Acquire = time.Since(start)
	if err != nil {
		return r, fmt.Errorf("servebench: acquire the streams' leases: %w", err)
	}
	r.Before = sample()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, wg, err := openStreams(sctx, s, leases, cfg.SSETimeout)
	r.Open = time.Since(start) - r.Acquire
	defer wg.Wait()
	defer cancel()
	if err != nil {
		return r, err
	}
	r.WithAll = sample()
	sent, err := endLeases(ctx, s, leases, cfg.Goroutines)
	waitEvents(ws, cfg.SSETimeout)
	waitDone(wg, endGrace)
	r.Released, r.Lost, r.All = deliveries(ws, sent)
	if err == nil && (!r.Released.ok() || !r.Lost.ok()) {
		err = fmt.Errorf("servebench: of %d streams, %d got their event and %d were then closed by the server (within %s)",
			n, r.Released.Delivered+r.Lost.Delivered, r.Released.Ended+r.Lost.Ended, cfg.SSETimeout)
	}
	return r, err
}

// openStreams starts a watcher per lease and waits until each stream has
// said "held" (or failed), up to timeout. The WaitGroup ends when every
// watcher has.
func openStreams(ctx context.Context, s *server, leases []lease, timeout time.Duration) ([]*watcher, *sync.WaitGroup, error) {
	ws := make([]*watcher, len(leases))
	opened := make(chan error, len(leases))
	sem := make(chan struct{}, openConcurrency)
	wg := &sync.WaitGroup{}
	for i, ls := range leases {
		w := newWatcher()
		ws[i] = w
		wg.Go(func() { w.run(ctx, s, ls.ID, sem, opened) })
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var errs []error
	for range leases {
		select {
		case err := <-opened:
			if err != nil && len(errs) < 3 {
				errs = append(errs, err)
			}
		case <-deadline.C:
			return ws, wg, fmt.Errorf("servebench: not every events stream opened within %s", timeout)
		}
	}
	if len(errs) > 0 {
		return ws, wg, fmt.Errorf("servebench: open the events streams: %w", errors.Join(errs...))
	}
	return ws, wg, nil
}

// endLeases releases the first half of leases and has an admin
// force-release the other half, recording when each request was sent.
func endLeases(ctx context.Context, s *server, leases []lease, workers int) ([]time.Time, error) {
	sent := make([]time.Time, len(leases))
	half := len(leases) / 2
	err := parallel(ctx, workers, len(leases), func(ctx context.Context, i int) error {
		sent[i] = time.Now()
		if i < half {
			return s.api.release(ctx, leases[i].ID)
		}
		return s.api.forceRelease(ctx, leases[i].Name)
	})
	if err != nil {
		err = fmt.Errorf("servebench: end the streams' leases: %w", err)
	}
	return sent, err
}

// waitEvents waits until every watcher got its end event (or failed), up
// to timeout.
func waitEvents(ws []*watcher, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, w := range ws {
		select {
		case <-w.got:
		case <-deadline.C:
			return
		}
	}
}

// waitDone waits for wg, up to timeout.
func waitDone(wg *sync.WaitGroup, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// deliveries summarises the watchers: the first half expected
// "released", the rest "lost"; all is from the first request sent to the
// last event.
func deliveries(ws []*watcher, sent []time.Time) (released, lost Delivery, all time.Duration) {
	half := len(ws) / 2
	released = delivery("released", ws[:half], sent[:half])
	lost = delivery("lost", ws[half:], sent[half:])
	var first, last time.Time
	for i, w := range ws {
		if ev, at, _ := w.result(); ev != "" {
			first = earliest(first, sent[i])
			if at.After(last) {
				last = at
			}
		}
	}
	if !first.IsZero() {
		all = last.Sub(first)
	}
	return released, lost, all
}

// delivery summarises watchers that expected event.
func delivery(event string, ws []*watcher, sent []time.Time) Delivery {
	d := Delivery{Event: event, Streams: len(ws)}
	var lat []time.Duration
	for i, w := range ws {
		ev, at, ended := w.result()
		switch {
		case ev == event:
			d.Delivered++
			if r := w.lostReason(); r != "" {
				d.Reasons = mapInc(d.Reasons, r)
			}
			if !sent[i].IsZero() {
				lat = append(lat, at.Sub(sent[i]))
			}
		case ev != "":
			d.Wrong++
		}
		if ended {
			d.Ended++
		}
	}
	d.P50, d.P99 = benchwork.Percentile(lat, 50), benchwork.Percentile(lat, 99)
	d.Max = benchwork.Percentile(lat, 100)
	return d
}

// mapInc adds one to m[k], making m if needed.
func mapInc(m map[string]int, k string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[k]++
	return m
}

// earliest is the earlier of a and b, where zero means unset.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// parallel runs fn(i) for i in [0, n) on workers goroutines; every i
// runs, and the error says how many failed and the first failure.
func parallel(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	var next, failed atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(ctx, i); err != nil {
					failed.Add(1)
					once.Do(func() { first = err })
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return fmt.Errorf("%d of %d failed, first: %w", failed.Load(), n, first)
	}
	return nil
}
