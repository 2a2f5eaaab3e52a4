package redislock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// honoursDeadlines reports whether c returns by its context's deadline: a
// go-redis client does only with ContextTimeoutEnabled (without it a
// stalled read waits out ReadTimeout, and is retried).
func honoursDeadlines(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

type result[T any] struct {
	v   T
	err error
}

// bounded runs fn and returns by ctx's deadline even on a client that
// does not honour it: fn then finishes in the background (within the
// client's own timeouts) and its outcome is dropped. An acquire dropped
// this way may have been applied; the portable layer releases the token
// of every abandoned attempt.
func bounded[T any](ctx context.Context, d *redisDriver, fn func() (T, error)) (T, error) {
	if d.honours || ctx.Done() == nil {
		return fn()
	}
	ch := make(chan result[T], 1)
	go func() {
		v, err := fn()
		ch <- result[T]{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
