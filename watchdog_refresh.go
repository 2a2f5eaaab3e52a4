package dlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Refreshes due go into the watchdog's pending list, and at most
// maxRefreshCalls goroutines send them, each a batch of up to maxBatch
// at a time, taking the next batch as soon as its call returns. Leases
// that come due while the calls are busy thus wait and travel together
// in the next batches, rather than each wake-up starting a call of its
// own: a Locker taking 100,000 Postgres leases started hundreds of small
// refresh calls at once, which queued for the pool's connections past
// their leases' loss times. A lease waits in the list as it would in
// flight: lost if no refresh is confirmed with a third of its TTL left.
//
// When the calls cannot keep up (all of them busy and a full batch
// more waiting), the Locker's new acquisitions wait until they do
// (keepUp): a Locker keeps the leases it holds before it takes more.
// Taking 100,000 Postgres leases as fast as 16 goroutines could, on two
// cores shared with the server, otherwise left refreshes too little of
// the machine, and the first leases taken were lost.
const (
	maxRefreshCalls = 4
	// maxBatch bounds one batched refresh call.
	maxBatch = 1000
)

// enqueue adds due, marked in flight by scan, to the pending list and
// starts the goroutines it needs to send them.
func (wd *watchdog) enqueue(due []*Lease) {
	if len(due) == 0 {
		return
	}
	wd.mu.Lock()
	wd.pending = append(wd.pending, due...)
	start := min(maxRefreshCalls-wd.callers, (len(wd.pending)+maxBatch-1)/maxBatch)
	wd.callers += start
	wd.updateBacklog()
	wd.mu.Unlock()
	for range start {
		wd.wg.Add(1)
		go wd.refresher()
	}
}

// refresher sends pending refreshes, a batch at a time, until none is
// left.
func (wd *watchdog) refresher() {
	defer wd.wg.Done()
	for {
		batch := wd.nextBatch()
		if batch == nil {
			return
		}
		wd.refresh(batch)
	}
}

// nextBatch takes up to maxBatch leases from the pending list, leaving
// out those the watchdog no longer keeps (lost or released meanwhile).
// It returns nil, and the calling refresher must exit, when none is left.
func (wd *watchdog) nextBatch() []*Lease {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	var batch []*Lease
	for len(wd.pending) > 0 && len(batch) < maxBatch {
		ls := wd.pending[0]
		wd.pending[0] = nil
		wd.pending = wd.pending[1:]
		if _, ok := wd.sched[ls]; ok {
			batch = append(batch, ls)
		}
	}
	if len(wd.pending) == 0 {
		wd.pending = nil // let the drained array go
	}
	if batch == nil {
		wd.callers--
	}
	wd.updateBacklog()
	return batch
}

// updateBacklog opens or closes the backlog that keepUp waits on: open
// while every refresh call is busy and a full batch more is pending.
func (wd *watchdog) updateBacklog() {
	behind := wd.callers == maxRefreshCalls && len(wd.pending) >= maxBatch
	switch {
	case behind && wd.backlog == nil:
		wd.backlog = make(chan struct{})
	case !behind && wd.backlog != nil:
		close(wd.backlog)
		wd.backlog = nil
	}
}

// keepUp waits while the refreshes due are behind (see updateBacklog),
// for them to catch up, ctx to end (its error is returned) or the
// watchdog to stop.
func (wd *watchdog) keepUp(ctx context.Context) error {
	wd.mu.Lock()
	backlog := wd.backlog
	wd.mu.Unlock()
	if backlog == nil {
		return nil
	}
	select {
	case <-backlog:
		return nil
	case <-wd.stop:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// refresh renews a batch of leases and records each outcome.
func (wd *watchdog) refresh(batch []*Lease) {
	sent := wd.clock.Now()
	// The deadline is on wd.clock; the context's timer runs on the host's.
	ctx, cancel := context.WithTimeout(context.Background(), wd.deadline(batch).Sub(sent))
	defer cancel()
	results := wd.send(ctx, batch)
	for i, ls := range batch {
		err := results[i]
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			wd.retryLater(ls, err)
			continue
		}
		// Record the outcome (a new schedule) before clearing inflight, so
		// that a scan in between does not see the old, due, refreshAt.
		_ = ls.refreshed(sent, ls.TTL(), err)
		wd.clearInflight(ls)
	}
	wd.poke()
}

func (wd *watchdog) deadline(batch []*Lease) time.Time {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	d := wd.clock.Now().Add(time.Hour)
	for _, ls := range batch {
		if s, ok := wd.sched[ls]; ok {
			d = earliest(d, s.lossAt)
		}
	}
	return d
}

// send refreshes batch in one call if the driver batches, else one call per
// lease, concurrently. results[i] belongs to batch[i].
func (wd *watchdog) send(ctx context.Context, batch []*Lease) []error {
	drv := wd.drv
	if br, ok := drv.(driver.BatchRefresher); ok && len(batch) > 1 {
		items := make([]driver.RefreshItem, len(batch))
		for i, ls := range batch {
			items[i] = driver.RefreshItem{Name: ls.name, Token: ls.token, TTL: ls.TTL()}
		}
		results, err := br.RefreshBatch(ctx, items)
		return batchOutcome(results, err, len(batch))
	}
	results := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, ls := range batch {
		wg.Go(func() { results[i] = drv.Refresh(ctx, ls.name, ls.token, ls.TTL()) })
	}
	wg.Wait()
	return results
}

func (wd *watchdog) clearInflight(ls *Lease) {
	wd.mu.Lock()
	if s, ok := wd.sched[ls]; ok {
		s.inflight = false
		wd.queue.fix(s)
	}
	wd.mu.Unlock()
}

// retryLater schedules another attempt after a transport failure.
func (wd *watchdog) retryLater(ls *Lease, err error) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if s, ok := wd.sched[ls]; ok {
		s.inflight = false
		s.lastErr = err
		s.retrying = true
		s.refreshAt = wd.clock.Now().Add(max(s.ttl/12, time.Millisecond))
		wd.queue.fix(s)
	}
}
