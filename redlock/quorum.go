package redlock

import (
	"context"
	"errors"
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
}

// ask runs op on every node in parallel and tallies the answers until
// enough says the outcome is decided, the node timeout passes or ctx is
// done. The requests still in flight then finish in the background.
func (d *redlock) ask(ctx context.Context, timeout time.Duration, op func(ctx context.Context, i int) (int64, error)) tally {
	ch := spread(context.WithoutCancel(ctx), d, timeout, op)
	n := len(d.nodes)
	var t tally
	// Twice the per-request bound, as in decide: requests that a busy
	// scheduler starts late still count.
	timer := time.NewTimer(2 * timeout)
	defer timer.Stop()
	for t.answered < n && !t.decided(n, d.quorum) {
		select {
		case r := <-ch:
			t.add(r.a.val, r.a.err)
		case <-timer.C:
			return t
		case <-ctx.Done():
			return t
		}
	}
	return t
}

func (t *tally) add(code int64, err error) {
	t.answered++
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
	errs := t.errs
	for range n - t.answered {
		errs = append(errs, errNodeTimeout)
	}
	return fmt.Errorf("redlock: %s confirmed by %d of %d nodes, %d needed: %w", op, t.done, n, q, errors.Join(errs...))
}
