package main

import (
	"context"
	"sync"
)

// tally counts what the schedulers' jobs and listeners report, by name,
// and lets the program wait for a count.
type tally struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{}
}

func newTally() *tally {
	return &tally{n: map[string]int{}, changed: make(chan struct{}, 1)}
}

// add counts one of what; it never blocks a scheduler.
func (t *tally) add(what string) {
	t.mu.Lock()
	t.n[what]++
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tally) get(what string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[what]
}

// until waits for done to hold, or for ctx to end.
func (t *tally) until(ctx context.Context, done func() bool) error {
	for !done() {
		select {
		case <-t.changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
