package redisfence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/redis/go-redis/v9"
)

//go:embed set.lua
var setSource string

var setScript = redis.NewScript(setSource)

// Client is the part of a go-redis v9 client the Guard uses;
// redis.UniversalClient, *redis.Client and *redis.ClusterClient satisfy it.
type Client interface {
	redis.Scripter
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// Guard writes fenced values through the user's client.
type Guard struct {
	c Client
}

// New returns a Guard over c. A nil client is an invalid argument.
func New(c Client) (*Guard, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil redis client", dlock.ErrInvalidArgument)
	}
	return &Guard{c: c}, nil
}

// FenceKey returns the key that stores key's fence, in key's hash slot.
// Keys containing '}' without a valid hash tag are rejected.
func FenceKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", dlock.ErrInvalidArgument)
	}
	if hasTag(key) {
		return key + ":fence", nil
	}
	if strings.Contains(key, "}") {
		return "", fmt.Errorf("%w: key %q contains '}' but no hash tag; give it one, e.g. {acct:1}:balance", dlock.ErrInvalidArgument, key)
	}
	return "{" + key + "}:fence", nil
}

// hasTag reports whether key has a Redis Cluster hash tag: a '{' followed
// later by a '}' with at least one byte between them.
func hasTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(key[open+1:], '}')
	return end > 0
}

// Set writes value at key if f is not lower than the fence stored beside
// it, and stores f as the new fence; one atomic script. A lower fence
// yields a *fence.StaleError (errors.Is fence.ErrStale).
func (g *Guard) Set(ctx context.Context, key string, f uint64, value any) error {
	fk, err := FenceKey(key)
	if err != nil {
		return err
	}
	if err := fence.Valid(f, 0); err != nil {
		return err
	}
	offered := strconv.FormatUint(f, 10)
	res, err := setScript.Run(ctx, g.c, []string{key, fk}, offered, value).Slice()
	if err != nil {
		return fmt.Errorf("redisfence: set %q: %w", key, err)
	}
	return result(key, f, res)
}

func result(key string, f uint64, res []any) error {
	if len(res) != 2 {
		return fmt.Errorf("redisfence: set %q: unexpected script reply %v", key, res)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	s, _ := res[1].(string)
	cur, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("redisfence: set %q: stored fence %q is not a number", key, s)
	}
	return fence.Rejected("redis", &fence.StaleError{Key: key, Offered: f, Current: cur})
}

// Get returns the value at key and the fence it was written with. ok is
// false when no value is stored.
func (g *Guard) Get(ctx context.Context, key string) (value string, f uint64, ok bool, err error) {
	fk, err := FenceKey(key)
	if err != nil {
		return "", 0, false, err
	}
	vals, err := g.c.MGet(ctx, key, fk).Result()
	if err != nil {
		return "", 0, false, fmt.Errorf("redisfence: get %q: %w", key, err)
	}
	v, vok := vals[0].(string)
	fs, _ := vals[1].(string)
	if !vok {
		return "", 0, false, nil
	}
	f, err = strconv.ParseUint(fs, 10, 64)
	if err != nil {
		return "", 0, false, errors.New("redisfence: get " + strconv.Quote(key) + ": stored fence is not a number")
	}
	return v, f, true, nil
}
