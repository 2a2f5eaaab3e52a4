package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// bounded runs f, a go-zookeeper call that takes no context, and returns
// its outcome or ctx's error, whichever comes first. When ctx wins, f
// keeps running to its end (go-zookeeper answers every request: with the
// server's reply, or an error when the connection drops or is closed) and
// its outcome is dropped; calls whose effects must not be dropped (a
// create) use boundedAfter.
func bounded[T any](ctx context.Context, f func() (T, error)) (T, error) {
	return boundedAfter(ctx, f, nil)
}

type outcome[T any] struct {
	v   T
	err error
}

// boundedAfter is bounded, calling after (when not nil) in f's goroutine
// with f's outcome once f returns; abandoned says whether the caller had
// given up on it by then.
func boundedAfter[T any](ctx context.Context, f func() (T, error), after func(v T, err error, abandoned bool)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		if after != nil {
			after(zero, err, false)
		}
		return zero, err
	}
	// state: 0 while f runs; 1 once f's outcome is the caller's; 2 once
	// the caller gave up. Whoever moves it from 0 decides.
	var state atomic.Int32
	ch := make(chan outcome[T], 1)
	go func() {
		v, err := f()
		mine := state.CompareAndSwap(0, 1)
		if mine {
			ch <- outcome[T]{v, err}
		}
		if after != nil {
			after(v, err, !mine)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(0, 2) {
			return zero, ctx.Err()
		}
		r := <-ch // f answered as ctx ended: its answer stands
		return r.v, r.err
	}
}

// permanent marks the errors retrying cannot cure (authentication, ACLs,
// bad arguments) with driver.Permanent, naming the znode; other errors
// are returned unchanged.
func permanent(err error, path string) error {
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		return driver.Permanent(fmt.Errorf("zookeeper: %s: %w (the ACL refuses this session: give credentials, zk://user:password@..., or use another root)", path, err))
	case errors.Is(err, zk.ErrAuthFailed), errors.Is(err, zk.ErrInvalidACL),
		errors.Is(err, zk.ErrBadArguments), errors.Is(err, zk.ErrNoChildrenForEphemerals):
		return driver.Permanent(fmt.Errorf("zookeeper: %s: %w", path, err))
	}
	return err
}

// transportErr reports whether err leaves a write's outcome unknown: the
// request may or may not have been applied.
func transportErr(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrClosing) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
