package rediscore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Call is one script call of a batch: its KEYS and ARGV.
type Call struct {
	Keys []string
	Args []any
}

// RunPipelined sends one call of s per element of calls, in one pipeline
// on c, by digest; if the server answers NOSCRIPT (after a restart or a
// SCRIPT FLUSH) it sends them again by source, which also caches the
// script again. The commands are in the order of calls.
func RunPipelined(ctx context.Context, c redis.Cmdable, s *redis.Script, calls []Call) ([]*redis.Cmd, error) {
	cmds, err := pipeline(ctx, c, s, calls, false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = pipeline(ctx, c, s, calls, true)
	}
	return cmds, err
}

func pipeline(ctx context.Context, c redis.Cmdable, s *redis.Script, calls []Call, source bool) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, call := range calls {
			if source {
				cmds[i] = s.Eval(ctx, p, call.Keys, call.Args...)
			} else {
				cmds[i] = s.EvalSha(ctx, p, call.Keys, call.Args...)
			}
		}
		return nil
	})
	return cmds, err
}

// Group returns the indexes of keys grouped into the calls of a batch: by
// Redis Cluster hash slot when cluster is set (a script touches one slot),
// one group otherwise, and at most max indexes a group when max > 0.
func Group(keys []string, cluster bool, max int) [][]int {
	current := map[int]int{} // slot → index of its group being filled
	var groups [][]int
	for i, key := range keys {
		s := 0
		if cluster {
			s = Slot(key)
		}
		g, ok := current[s]
		if !ok || max > 0 && len(groups[g]) == max {
			g = len(groups)
			current[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// Batch is the calls of one script for many locks, one call per group
// (Group): Calls[g] covers the locks whose indexes are Groups[g].
type Batch struct {
	Groups [][]int
	Calls  []Call
}

// Extension is one lock a RefreshBatch call extends: its key, the mark of
// its holder (Mark), and its new TTL in ms.
type Extension struct {
	Key, Mark string
	TTL       int64
}

// RefreshBatchOf returns the RefreshBatch calls that extend exts: grouped
// by Cluster hash slot when cluster is set (one group otherwise), at most
// max locks a call when max > 0.
func RefreshBatchOf(exts []Extension, cluster bool, max int) Batch {
	keys := make([]string, len(exts))
	for i, e := range exts {
		keys[i] = e.Key
	}
	b := Batch{Groups: Group(keys, cluster, max)}
	b.Calls = make([]Call, len(b.Groups))
	for g, idx := range b.Groups {
		c := Call{Keys: make([]string, len(idx)), Args: make([]any, 0, 2*len(idx))}
		for j, i := range idx {
			c.Keys[j] = keys[i]
			c.Args = append(c.Args, exts[i].Mark, exts[i].TTL)
		}
		b.Calls[g] = c
	}
	return b
}

// Run sends b's calls of s in one pipeline on c (RunPipelined) and
// returns their codes (Codes).
func (b Batch) Run(ctx context.Context, c redis.Cmdable, s *redis.Script, n int) ([]int64, error) {
	cmds, err := RunPipelined(ctx, c, s, b.Calls)
	if err != nil {
		return nil, err
	}
	return b.Codes(cmds, n)
}

// Codes reads the replies to b's calls, cmds[g] to Calls[g], each a list
// of one code per lock of its call, into one code per lock, n in all, in
// the locks' order. A reply that is an error, or that has a code too many
// or too few, fails the whole batch.
func (b Batch) Codes(cmds []*redis.Cmd, n int) ([]int64, error) {
	codes := make([]int64, n)
	for g, idx := range b.Groups {
		got, err := cmds[g].Int64Slice()
		if err == nil && len(got) != len(idx) {
			err = fmt.Errorf("a batch call answered %d results for %d locks", len(got), len(idx))
		}
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			codes[i] = got[j]
		}
	}
	return codes, nil
}
