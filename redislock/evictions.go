package redislock

import (
	"context"
	"sync"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

// evictionBuffer is how many eviction messages wait for the portable layer
// before the oldest is dropped (its holder then learns at its next
// refresh).
const evictionBuffer = 64

// evictionChannel is the channel, under the prefix, on which ForceRelease
// announces each eviction as "FENCE NAME" (the evicted holder's fence).
// Every Locker with the same prefix that holds leases listens on it.
func (d *redisDriver) evictionChannel() string { return d.cfg.prefix + "evicted" }

// publishEviction announces that ForceRelease evicted the holder of name
// with fence. Best effort: the release itself has happened, so a failed
// PUBLISH is not an error; the holder then learns at its next refresh.
func (d *redisDriver) publishEviction(ctx context.Context, name string, fence uint64) {
	payload := driver.Eviction{Name: name, Fence: fence}.String()
	if err := d.client.Publish(ctx, d.evictionChannel(), payload).Err(); err != nil {
		d.log().DebugContext(ctx, "redislock: eviction not announced; the holder learns at its next refresh",
			"lock", name, "fence", fence, "error", err)
	}
}

// WatchEvictions implements driver.EvictionWatcher. It subscribes to the
// eviction channel on the driver's shared pub/sub connection (the one the
// waiters use, so a Locker keeps one such connection), and returns once
// Redis confirmed the SUBSCRIBE. stop unsubscribes and waits for the
// goroutine that decodes the messages.
func (d *redisDriver) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	w := rediscore.NewListener(evictionBuffer)
	unsubscribe, err := d.subscribe(ctx, d.evictionChannel(), w)
	if err != nil {
		return nil, nil, err
	}
	out := make(chan driver.Eviction, evictionBuffer)
	quit, done := make(chan struct{}), make(chan struct{})
	go decodeEvictions(w.Messages(), out, quit, done)
	stop := sync.OnceFunc(func() {
		unsubscribe()
		close(quit)
		<-done
	})
	return out, stop, nil
}

// decodeEvictions turns the channel's messages into evictions until quit
// is closed, then closes out and done.
func decodeEvictions(msgs <-chan string, out chan<- driver.Eviction, quit <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer close(out)
	for {
		select {
		case <-quit:
			return
		case m := <-msgs:
			e, ok := driver.ParseEviction(m)
			if !ok {
				continue
			}
			select {
			case out <- e:
			case <-quit:
				return
			}
		}
	}
}
