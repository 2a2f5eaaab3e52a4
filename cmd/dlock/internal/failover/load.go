package failover

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// loadHold is how long a load cycle holds its lease before releasing it.
const loadHold = time.Millisecond

// perWorker is the cycles per second of one load worker: two requests a
// cycle keep each worker's token at 40 requests/s, well within a
// replica's bound per client (100/s).
const perWorker = 20

// loadWorkers is the number of workers that make rate cycles per second.
func loadWorkers(rate int) int { return (rate + perWorker - 1) / perWorker }

// loadStats is what the load saw, all workers together.
type loadStats struct {
	mu            sync.Mutex
	latencies     []time.Duration // of the granted acquires
	busy          int             // 409: still held when the wait ran out
	unreachable   int             // acquires that reached no replica
	statuses      map[string]int  // any other failed answer, by status
	releaseFailed int             // releases answered anything but 204, or that reached no replica
}

func (s *loadStats) add(f func(s *loadStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// loadWorker makes acquire/release cycles on the contended names through
// its replica, turning to the next replica of its list when it is gone.
type loadWorker struct {
	index  int
	eps    []*endpoint
	cur    int
	cfg    Config
	ledger *Ledger
	stats  *loadStats
}

// run makes one cycle per tick until ctx ends.
func (w *loadWorker) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.cycle(ctx)
		}
	}
}

// cycle takes a random contended name, holds it loadHold and releases it,
// writing the grant into the ledger.
func (w *loadWorker) cycle(ctx context.Context) {
	g := Grant{Name: "failover-load-" + strconv.Itoa(rand.N(w.cfg.LoadNames)), TTL: w.cfg.LoadTTL, Requested: time.Now()}
	ls, err := w.eps[w.cur].acquire(ctx, g.Name, w.cfg.LoadTTL, w.cfg.LoadWait, "failover/load-"+strconv.Itoa(w.index))
	g.Answered = time.Now()
	if err != nil {
		w.failed(err)
		return
	}
	g.Fence = ls.Fence
	w.stats.add(func(s *loadStats) { s.latencies = append(s.latencies, g.Answered.Sub(g.Requested)) })
	time.Sleep(loadHold)
	g.Ended = time.Now()
	w.ledger.Add(g)
	w.release(ctx, ls.ID)
}

// failed counts an acquire that was not granted; an unreachable replica
// sends the worker to the next one.
func (w *loadWorker) failed(err error) {
	switch s := statusOf(err); {
	case s < 0: // the run is over
	case s == 0:
		w.cur = (w.cur + 1) % len(w.eps)
		w.stats.add(func(st *loadStats) { st.unreachable++ })
	case s == http.StatusConflict:
		w.stats.add(func(st *loadStats) { st.busy++ })
	default:
		w.stats.add(func(st *loadStats) { st.statuses[strconv.Itoa(s)]++ })
	}
}

// release gives the lease back through the worker's replica, or the next
// ones if it is gone.
func (w *loadWorker) release(ctx context.Context, id string) {
	for range w.eps {
		err := w.eps[w.cur].release(ctx, id)
		switch s := statusOf(err); {
		case err == nil, s < 0:
			return
		case s != 0:
			w.stats.add(func(st *loadStats) { st.releaseFailed++ })
			return
		}
		w.cur = (w.cur + 1) % len(w.eps)
	}
	w.stats.add(func(st *loadStats) { st.releaseFailed++ })
}
