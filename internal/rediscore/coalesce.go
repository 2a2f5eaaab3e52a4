package rediscore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Coalescer is a redis.Scripter whose EVALSHA calls, made by many
// goroutines at the same moment, travel together: one pipeline on one
// connection, instead of a round trip each. Every unpipelined call pays a
// read and a write on both sides; sixteen calls in one pipeline pay them
// once.
//
// There is no timer and no goroutine of its own. At most `most` flushes
// are in flight; a call that finds a free one sends its command at once,
// alone (one goroutine alone pays nothing added). A call that finds every
// flush busy queues, and when a flush ends, the calls queued meanwhile go
// in the next one, sent by the first of them (from a goroutine that ends
// with it, so that this first call too returns by its deadline). No
// pipeline is sent for a goroutine that has no command in it.
//
// Each call keeps its own outcome: a script's error is its command's
// alone, and a call whose context ends returns then, whether or not its
// command was sent (a queued command that was not is dropped). A
// pipeline is bounded by the latest deadline of the calls in it, so that
// one call's deadline does not cut the others short. Eval and the other
// Scripter methods go straight to the client.
type Coalescer struct {
	redis.Scripter
	c    redis.UniversalClient
	most int

	mu       sync.Mutex
	inFlight int
	queue    []*pending
}

// pending is a queued call. wake receives the batch it is to send, when
// it heads one, then nil once its command has been answered: at most one
// message waits there at a time.
type pending struct {
	ctx   context.Context
	cmd   *redis.Cmd
	taken bool // put in a batch: its command is or will be sent
	leads bool // heads its batch: the batch is sent to wake
	wake  chan []*pending
}

// NewCoalescer coalesces the EVALSHA calls made on c, with at most most
// pipelines in flight (at least 1).
func NewCoalescer(c redis.UniversalClient, most int) *Coalescer {
	return &Coalescer{Scripter: c, c: c, most: max(most, 1)}
}

// EvalSha runs the script with digest sha1, alone or in a pipeline with
// the calls made meanwhile (see Coalescer).
func (k *Coalescer) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := evalShaCmd(ctx, sha1, keys, args)
	k.mu.Lock()
	if k.inFlight < k.most {
		k.inFlight++
		k.mu.Unlock()
		_ = k.c.Process(ctx, cmd)
		k.done()
		return cmd
	}
	p := &pending{ctx: ctx, cmd: cmd, wake: make(chan []*pending, 1)}
	k.queue = append(k.queue, p)
	k.mu.Unlock()
	sending := false // this call heads its batch, sent from a goroutine
wait:
	for {
		select {
		case batch := <-p.wake:
			switch {
			case batch == nil: // answered
				return cmd
			case len(batch) == 1:
				k.send(batch)
				return cmd
			}
			// Sent from a goroutine, so that this call still returns by
			// its own deadline when the pipeline takes longer.
			sending = true
			go k.send(batch)
		case <-ctx.Done():
			break wait
		}
	}
	k.mu.Lock()
	if !p.taken {
		k.drop(p)
		k.mu.Unlock()
		cmd.SetErr(ctx.Err())
		return cmd
	}
	leads := p.leads
	k.mu.Unlock()
	if leads && !sending {
		// The batch is on its way to p, and its other calls wait for it:
		// it is sent all the same, on a goroutine that ends with it.
		go func() { k.send(<-p.wake) }()
	}
	late := redis.NewCmd(ctx)
	late.SetErr(ctx.Err())
	return late
}

// send sends batch, tells each of its calls that it is answered, and
// ends the flush.
func (k *Coalescer) send(batch []*pending) {
	if len(batch) == 1 {
		_ = k.c.Process(batch[0].ctx, batch[0].cmd)
	} else {
		ctx, cancel := batchContext(batch)
		_, _ = k.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, b := range batch {
				_ = p.Process(ctx, b.cmd)
			}
			return nil
		})
		cancel()
	}
	for _, b := range batch {
		b.wake <- nil
	}
	k.done()
}

// done ends a flush: the calls queued meanwhile become the next batch,
// handed to the first of them to send, else the flush is free.
func (k *Coalescer) done() {
	k.mu.Lock()
	if len(k.queue) == 0 {
		k.inFlight--
		k.mu.Unlock()
		return
	}
	batch := k.queue
	k.queue = nil
	for _, b := range batch {
		b.taken = true
	}
	batch[0].leads = true
	k.mu.Unlock()
	batch[0].wake <- batch
}

// drop takes p, not yet taken, out of the queue. k.mu is held.
func (k *Coalescer) drop(p *pending) {
	for i, q := range k.queue {
		if q == p {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			return
		}
	}
}

// batchContext is the context a batch is sent under: the first call's
// values without its cancellation, and the latest deadline of the calls
// in it (none if one of them has none).
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, b := range batch {
		dl, ok := b.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(ctx, latest)
}

// evalShaCmd is the command go-redis's EvalSha sends: EVALSHA sha1
// numkeys keys... args..., its first key at position 3 (a Cluster client
// routes it by that key's slot).
func evalShaCmd(ctx context.Context, sha1 string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", sha1, len(keys))
	for _, key := range keys {
		a = append(a, key)
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}
