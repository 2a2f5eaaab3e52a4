package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
)

// subscribeTimeout bounds how long Watch waits for Redis to confirm a
// SUBSCRIBE; past it the caller falls back to polling.
const subscribeTimeout = 5 * time.Second

// Watch implements driver.Notifier for the channel of name. Once the
// subscription is in place it sets name's watched mark, without which a
// release with nobody queued publishes nothing (it saves the uncontended
// release a call); the waiter's own attempts that find the lock held keep
// the mark alive (rediscore.WatchedTTL). The waiters of one driver take
// turns (rediscore.NewWaiter): a release wakes one of them.
func (d *redisDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w := rediscore.NewWaiter()
	stop, err := d.subscribe(ctx, d.keys.Channel(name), w)
	if err != nil {
		return nil, nil, err
	}
	_, err = bounded(ctx, d, func() (struct{}, error) {
		return struct{}{}, d.client.Set(ctx, d.keys.Watched(name), "1", rediscore.WatchedTTL).Err()
	})
	if err != nil {
		stop()
		return nil, nil, rediscore.Classify(err)
	}
	return w.C(), stop, nil
}

// subscribe adds w to channel on the driver's one pub/sub connection
// (d.notify, shared by every waiter and by WatchEvictions) and waits, at
// most subscribeTimeout, until Redis confirmed the subscription. stop
// returns once Redis confirmed the UNSUBSCRIBE of the channel's last
// waiter (at most 5 s later).
func (d *redisDriver) subscribe(ctx context.Context, channel string, w *rediscore.Waiter) (func(), error) {
	return d.subscribeWith(ctx, channel, w, d.notify.Subscribe)
}

// subscribeOwn is subscribe for a channel of w's own (rediscore.Mux's
// SubscribeOwn): stop returns at once.
func (d *redisDriver) subscribeOwn(ctx context.Context, channel string, w *rediscore.Waiter) (func(), error) {
	return d.subscribeWith(ctx, channel, w, d.notify.SubscribeOwn)
}

func (d *redisDriver) subscribeWith(ctx context.Context, channel string, w *rediscore.Waiter, sub func(context.Context, string, *rediscore.Waiter) (func(), error)) (func(), error) {
	ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	stop, err := sub(ctx, channel, w)
	if errors.Is(err, rediscore.ErrClosed) {
		return nil, fmt.Errorf("redislock: %w", err)
	}
	return stop, err
}
