package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Codes the refresh and release scripts answer with.
const (
	codeDone  = 1  // extended / released
	codeGone  = 0  // no lock on this node
	codeOther = -1 // another token holds it here
)

// tally counts the nodes' answers to one single-phase request.
type tally struct {
	done, gone, other int
	errs              []error
	answered          int
	heard             []bool // by node
}

// ask runs op on every node in parallel and tallies the answers until
// enough says the outcome is decided, the node timeout passes or ctx is
// done. The requests still in flight then finish in the background; the
// nodes not heard from count as errNodeTimeout.
func (d *redlock) ask(ctx context.Context, timeout, linger time.Duration, op func(ctx context.Context, i int) (int64, error)) tally {
	return d.askEach(ctx, timeout, linger, 1, func(ctx context.Context, i int) ([]int64, error) {
		v, err := op(ctx, i)
		return []int64{v}, err
	})[0]
}

// askEach is ask for a request about m locks at once: op answers one code
// per lock. It returns one tally per lock once every lock's outcome is
// decided (and, with linger > 0, the nodes not yet heard from have had
// linger more to answer), every node has answered, the node timeout
// (twice) passes or ctx is done.
func (d *redlock) askEach(ctx context.Context, timeout, linger time.Duration, m int, op func(ctx context.Context, i int) ([]int64, error)) []tally {
	ch := spread(ctx, true, d, timeout, op)
	n := len(d.nodes)
	ts := make([]tally, m)
	for j := range ts {
		ts[j].heard = make([]bool, n)
	}
	// Twice the per-request bound, as in decide: requests that a busy
	// scheduler starts late still count.
	timer := time.NewTimer(2 * timeout)
	defer timer.Stop()
	var lingering <-chan time.Time
wait:
	for answered := 0; answered < n; {
		if lingering == nil && allDecided(ts, n, d.quorum) {
			if linger <= 0 {
				break
			}
			lt := time.NewTimer(linger)
			defer lt.Stop()
			lingering = lt.C
		}
		select {
		case <-lingering:
			break wait
		case r := <-ch:
			answered++
			err := r.a.err
			if err == nil && len(r.a.val) != m {
				err = d.nodeErr(r.i, fmt.Errorf("answered %d results for %d locks", len(r.a.val), m))
			}
			for j := range ts {
				var code int64
				if err == nil {
					code = r.a.val[j]
				}
				ts[j].add(r.i, code, err)
			}
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	for j := range ts {
		ts[j].silent(d)
	}
	return ts
}

func allDecided(ts []tally, n, q int) bool {
	for j := range ts {
		if !ts[j].decided(n, q) {
			return false
		}
	}
	return true
}

func (t *tally) add(i int, code int64, err error) {
	t.answered++
	t.heard[i] = true
	switch {
	case err != nil:
		t.errs = append(t.errs, err)
	case code == codeDone:
		t.done++
	case code == codeOther:
		t.other++
	default:
		t.gone++
	}
}

// silent adds an errNodeTimeout, named, for each node not heard from.
func (t *tally) silent(d *redlock) {
	for i, h := range t.heard {
		if !h {
			t.errs = append(t.errs, d.nodeErr(i, errNodeTimeout))
		}
	}
}

// decided: a majority agreed, or none can any more.
func (t *tally) decided(n, q int) bool {
	return t.done >= q || t.gone+t.other >= q || t.done+n-t.answered < q
}

// outcome turns a tally into the driver's answer: nil when a majority
// did it, ErrTakenOver / ErrExpired when a majority says the token does
// not hold the lock, else an error naming what failed.
func (t *tally) outcome(op string, n, q int) error {
	switch {
	case t.done >= q:
		return nil
	case t.other >= q:
		return driver.ErrTakenOver
	case t.gone+t.other >= q:
		return driver.ErrExpired
	}
	return fmt.Errorf("redlock: %s confirmed by %d of %d nodes, %d needed: %w", op, t.done, n, q, joinNodes(t.errs))
}
