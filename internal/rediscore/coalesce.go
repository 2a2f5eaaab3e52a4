package rediscore

import (
	"context"

	"github.com/dlockdev/dlock/internal/coalesce"
	"github.com/redis/go-redis/v9"
)

// Coalescer is a redis.Scripter whose EVALSHA calls, made by many
// goroutines at the same moment, travel together: one pipeline on one
// connection, instead of a round trip each (internal/coalesce says how).
// Each call keeps its own outcome: a script's error is its command's
// alone. Eval and the other Scripter methods go straight to the client.
type Coalescer struct {
	redis.Scripter
	calls *coalesce.Batcher[*redis.Cmd]
}

// NewCoalescer coalesces the EVALSHA calls made on c, with at most most
// pipelines in flight (at least 1).
func NewCoalescer(c redis.UniversalClient, most int) *Coalescer {
	one := func(ctx context.Context, cmd *redis.Cmd) { _ = c.Process(ctx, cmd) }
	many := func(ctx context.Context, cmds []*redis.Cmd) {
		_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, cmd := range cmds {
				_ = p.Process(ctx, cmd)
			}
			return nil
		})
	}
	return &Coalescer{Scripter: c, calls: coalesce.New(most, one, many)}
}

// EvalSha runs the script with digest sha1, alone or in a pipeline with
// the calls made meanwhile (see Coalescer).
func (k *Coalescer) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := evalShaCmd(ctx, sha1, keys, args)
	if k.calls.Do(ctx, cmd) {
		return cmd
	}
	late := redis.NewCmd(ctx)
	late.SetErr(ctx.Err())
	return late
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
