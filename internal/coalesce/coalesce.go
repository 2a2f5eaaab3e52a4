// Package coalesce sends together the calls that many goroutines make at
// the same moment: one pipeline, or one statement, on one connection,
// instead of a round trip each. Every call sent alone pays a read and a
// write on both sides; sixteen calls sent together pay them once.
//
// There is no timer and no goroutine of its own. At most `most` sends are
// in flight; a call that finds a free one is sent at once, alone (one
// goroutine alone pays nothing added). A call that finds every send busy
// queues, and when a send ends, the calls queued meanwhile go together in
// the next one, sent by the first of them (from a goroutine that ends with
// it, so that this first call too returns by its deadline). Nothing is
// sent for a goroutine that has no call in it.
//
// A call whose context ends returns then, whether or not it was sent (a
// queued call that was not is dropped). Calls sent together run under
// the latest deadline among them, so that one call's deadline does not cut
// the others short.
package coalesce

import (
	"context"
	"sync"
	"time"
)

// Batcher sends calls of type T, alone with One or together with Many.
// Both record each call's outcome in the call itself (T is a pointer, or
// holds one).
type Batcher[T any] struct {
	most int
	one  func(ctx context.Context, call T)
	many func(ctx context.Context, calls []T)

	mu       sync.Mutex
	inFlight int
	queue    []*pending[T]
}

// pending is a queued call. wake receives the batch it is to send, when
// it heads one, then nil once it has been answered: at most one message
// waits there at a time.
type pending[T any] struct {
	ctx   context.Context
	call  T
	taken bool // put in a batch: it is or will be sent
	leads bool // heads its batch: the batch is sent to wake
	wake  chan []*pending[T]
}

// New returns a Batcher with at most most sends in flight (at least 1).
// one sends a call alone under the call's own context; many sends two or
// more together under the context of them all: the first call's values,
// no cancellation, and the latest of their deadlines (none if one has
// none). Each must record every call's outcome before it returns.
func New[T any](most int, one func(ctx context.Context, call T), many func(ctx context.Context, calls []T)) *Batcher[T] {
	return &Batcher[T]{most: max(most, 1), one: one, many: many}
}

// Do sends call, alone or together with the calls made meanwhile, and
// reports whether it was answered: false when ctx ended first, and then
// the call's outcome is not to be read (it may still be sent, and
// written, later).
func (b *Batcher[T]) Do(ctx context.Context, call T) bool {
	b.mu.Lock()
	if b.inFlight < b.most {
		b.inFlight++
		b.mu.Unlock()
		b.one(ctx, call)
		b.done()
		return true
	}
	p := &pending[T]{ctx: ctx, call: call, wake: make(chan []*pending[T], 1)}
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	sending := false // this call heads its batch, sent from a goroutine
wait:
	for {
		select {
		case batch := <-p.wake:
			switch {
			case batch == nil: // answered
				return true
			case len(batch) == 1:
				b.send(batch)
				return true
			}
			// Sent from a goroutine, so that this call still returns by
			// its own deadline when the batch takes longer.
			sending = true
			go b.send(batch)
		case <-ctx.Done():
			break wait
		}
	}
	b.mu.Lock()
	if !p.taken {
		b.drop(p)
		b.mu.Unlock()
		return false
	}
	leads := p.leads
	b.mu.Unlock()
	if leads && !sending {
		// The batch is on its way to p, and its other calls wait for it:
		// it is sent all the same, on a goroutine that ends with it.
		go func() { b.send(<-p.wake) }()
	}
	return false
}

// Waiting is how many calls are queued, waiting for a send to end.
func (b *Batcher[T]) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// send sends batch, tells each of its calls that it is answered, and
// ends the send.
func (b *Batcher[T]) send(batch []*pending[T]) {
	if len(batch) == 1 {
		b.one(batch[0].ctx, batch[0].call)
	} else {
		ctx, cancel := batchContext(batch)
		calls := make([]T, len(batch))
		for i, p := range batch {
			calls[i] = p.call
		}
		b.many(ctx, calls)
		cancel()
	}
	for _, p := range batch {
		p.wake <- nil
	}
	b.done()
}

// done ends a send: the calls queued meanwhile become the next batch,
// handed to the first of them to send, else the send is free.
func (b *Batcher[T]) done() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.inFlight--
		b.mu.Unlock()
		return
	}
	batch := b.queue
	b.queue = nil
	for _, p := range batch {
		p.taken = true
	}
	batch[0].leads = true
	b.mu.Unlock()
	batch[0].wake <- batch
}

// drop takes p, not yet taken, out of the queue. b.mu is held.
func (b *Batcher[T]) drop(p *pending[T]) {
	for i, q := range b.queue {
		if q == p {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return
		}
	}
}

// batchContext is the context a batch is sent under: the first call's
// values without its cancellation, and the latest deadline of the calls
// in it (none if one of them has none).
func batchContext[T any](batch []*pending[T]) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, p := range batch {
		dl, ok := p.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(ctx, latest)
}
