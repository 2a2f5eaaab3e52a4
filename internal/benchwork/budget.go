package benchwork

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Budget bounds a run: a fixed count of operations or a wall-clock
// duration. The zero Budget allows nothing.
type Budget struct {
	count int
	d     time.Duration
}

// Count is a Budget of n operations, shared by all workers (b.N in a
// benchmark).
func Count(n int) Budget { return Budget{count: n} }

// For is a Budget of d of wall time: workers start operations until d has
// passed, and a contended wait still under way then is canceled (or,
// with Contend.Drain, given that long more to be granted).
func For(d time.Duration) Budget { return Budget{d: d} }

// Timed reports whether b is a duration.
func (b Budget) Timed() bool { return b.d > 0 }

// String is "N ops" or the duration.
func (b Budget) String() string {
	if b.Timed() {
		return b.d.String()
	}
	return fmt.Sprintf("%d ops", b.count)
}

// meter hands a run's operations out to its workers.
type meter struct {
	ctx  context.Context // done when the run's waits must stop
	left atomic.Int64    // count budgets: operations not yet started
	end  time.Time       // timed budgets: no operation starts after it
	stop time.Time       // timed budgets: when ctx ends (end, plus any drain)
}

// start begins a run under ctx; with a timed budget the returned
// context is canceled drain after the budget, and cancel must be called
// when the run is over.
//
// The run's end cancels its context rather than being its deadline: the
// workloads stand for long-running workers, whose waits have no deadline
// (a shutdown cancels them), and a deadline on every call would make each
// wait a bounded one, which some lockers pay for (dlock's etcd and
// Postgres drivers end a bounded wait in the server, so that a waiter
// that gave up never holds the lock). A workload that wants bounded
// waits asks for them itself.
func (b Budget) start(ctx context.Context, drain time.Duration) (*meter, context.CancelFunc) {
	m := &meter{}
	var cancel context.CancelFunc
	m.ctx, cancel = context.WithCancel(ctx)
	if !b.Timed() {
		m.left.Store(int64(b.count))
		return m, cancel
	}
	m.end = time.Now().Add(b.d)
	m.stop = m.end.Add(max(drain, 0))
	stop := time.AfterFunc(time.Until(m.stop), cancel)
	return m, func() {
		stop.Stop()
		cancel()
	}
}

// next reports whether a worker may start another operation.
func (m *meter) next() bool {
	if m.ctx.Err() != nil {
		return false
	}
	if !m.end.IsZero() {
		return time.Now().Before(m.end)
	}
	return m.left.Add(-1) >= 0
}

// endSlack is how close to a timed run's end an error still counts as
// the end cutting a wait short: a workload whose waits are bounded by the
// run's end may see a driver end one in the server a little before its
// deadline (pglock's advisory mode, by up to 50 ms), so that nothing stays
// queued when the call returns.
const endSlack = 100 * time.Millisecond

// over reports whether the run's waits have been stopped (or are about
// to be), so that an error seen now is the budget's cancellation rather
// than a failure.
func (m *meter) over() bool {
	return m.ctx.Err() != nil || (!m.stop.IsZero() && time.Until(m.stop) < endSlack)
}
