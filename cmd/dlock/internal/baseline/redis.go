package baseline

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// The baseline's scripts, each loaded once and run by EVALSHA: an
// acquire that sets the key and, only when it took it, increments the
// name's fence counter (one round trip, the fence in the reply); and a
// release that deletes the key only if the token matches.
const (
	redisAcquire = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end
return 0`
	redisRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`
)

// openRedis compares redislock with the two-script baseline.
func openRedis(ctx context.Context, u *url.URL, ttl time.Duration, opts []dlock.Option) (*Target, error) {
	rcfg, newClient, err := redisURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{
		Backend:  "redis",
		Baseline: "one Lua script per acquire (SET NX PX, INCR of the fence when taken) and one per token-checked release, by EVALSHA",
	}
	mk := func(rt *Counter) (redis.UniversalClient, error) {
		c := newClient()
		t.onClose(func() { _ = c.Close() })
		cc, cluster := c.(*redis.ClusterClient)
		if cluster {
			// A cluster client's own hooks see a pipeline once, however
			// many primaries it is split over; its nodes' hooks see each
			// round trip.
			cc.OnNewNode(func(n *redis.Client) { n.AddHook(redisHook{rt}) })
		}
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		if !cluster {
			c.AddHook(redisHook{rt})
		}
		return c, nil
	}
	drt := &Counter{}
	dc, err := mk(drt)
	if err == nil {
		err = t.redisSides(ctx, dc, drt, rcfg, opts, ttl, mk)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	admin := newClient()
	t.onClose(func() { _ = admin.Close() })
	t.ServerTime = func(ctx context.Context) (time.Duration, error) { return serverCPU(ctx, admin) }
	t.ServerTimeKind = "server process CPU (INFO cpu)"
	return t, nil
}

// redisSides sets up both sides, each on a client of its own.
func (t *Target) redisSides(ctx context.Context, dc redis.UniversalClient, drt *Counter, rcfg redislock.Config, opts []dlock.Option,
	ttl time.Duration, mk func(*Counter) (redis.UniversalClient, error)) error {
	newLocker := func(o ...dlock.Option) (*dlock.Locker, error) {
		return rcfg.Locker(dc, append(opts[:len(opts):len(opts)], o...)...)
	}
	t.NewLocker = newLocker
	var err error
	if t.Dlock, err = t.dlockSide(func() (*dlock.Locker, error) { return newLocker() }, drt); err != nil {
		return err
	}
	rt := &Counter{}
	bc, err := mk(rt)
	if err != nil {
		return err
	}
	rb, err := newRedisBaseline(ctx, bc, ttl)
	if err != nil {
		return err
	}
	t.Base = Side{Cycle: cycleOf(rb.attempt), Contenders: polls(shared(rb.attempt)), RoundTrips: rt}
	return nil
}

// redisURL maps redislock's own query keys to a Config and returns a
// constructor of go-redis clients for the rest of the URL.
func redisURL(u *url.URL) (redislock.Config, func() redis.UniversalClient, error) {
	q := u.Query()
	var rcfg redislock.Config
	cluster := q.Has("addr")
	for _, k := range []string{"cluster", "fair"} {
		if !q.Has(k) {
			continue
		}
		on, err := strconv.ParseBool(q.Get(k))
		if err != nil {
			return rcfg, nil, fmt.Errorf("%w: redis URL query %s=%q: want true or false", dlock.ErrInvalidArgument, k, q.Get(k))
		}
		if k == "cluster" {
			cluster = cluster || on
		} else {
			rcfg.NoFairQueue = !on
		}
		q.Del(k)
	}
	if q.Has("prefix") {
		if rcfg.Prefix = q.Get("prefix"); rcfg.Prefix == "" {
			return rcfg, nil, fmt.Errorf("%w: redis URL query prefix is empty: give a key prefix, or leave the key out for the default", dlock.ErrInvalidArgument)
		}
		q.Del("prefix")
	}
	for _, k := range []string{"replica_sync", "replica_timeout"} {
		if q.Has(k) {
			return rcfg, nil, fmt.Errorf("%w: redis URL query %s: not supported by bench --compare (the baseline does not wait for replicas)", dlock.ErrInvalidArgument, k)
		}
	}
	v := *u
	v.RawQuery = q.Encode()
	if cluster {
		o, err := redis.ParseClusterURL(v.String())
		if err != nil {
			return rcfg, nil, fmt.Errorf("%w: redis cluster URL: %s", dlock.ErrInvalidArgument, scrubURLErr(err, u))
		}
		o.ContextTimeoutEnabled = true // as dlock.Open builds it (redislock's URL default)
		return rcfg, func() redis.UniversalClient { return redis.NewClusterClient(o) }, nil
	}
	o, err := redis.ParseURL(v.String())
	if err != nil {
		return rcfg, nil, fmt.Errorf("%w: redis URL: %s", dlock.ErrInvalidArgument, scrubURLErr(err, u))
	}
	// Both sides' clients are built as dlock.Open builds one from the URL:
	// with ContextTimeoutEnabled (redislock's URL default), without which
	// the driver bounds each call by a deadline on a goroutine of its own.
	o.ContextTimeoutEnabled = true
	return rcfg, func() redis.UniversalClient { return redis.NewClient(o) }, nil
}

// scrubURLErr is err's text without the URL's password.
func scrubURLErr(err error, u *url.URL) string {
	msg := err.Error()
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}

// redisHook counts every command and every pipeline as one round trip,
// except a new connection's set-up (HELLO, AUTH, SELECT, CLIENT SETINFO),
// which go-redis also sends through the hooks: its count depends on when
// the pool dials, not on the lock. On a cluster it is on each node's
// client, where it also sees the cluster client's own upkeep (CLUSTER
// SLOTS, COMMAND), left out for the same reason.
type redisHook struct{ rt *Counter }

// setupCommands are the commands go-redis sends to set a connection, or
// its view of a cluster, up.
var setupCommands = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true,
	"cluster": true, "command": true}

func (h redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setupCommands[cmd.Name()] {
			h.rt.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || !setupCommands[cmds[0].Name()] {
			h.rt.Add(1)
		}
		return next(ctx, cmds)
	}
}

// redisBaseline is the hand-written Redis lock.
type redisBaseline struct {
	c                redis.UniversalClient
	ttlMs            int64
	acquire, release string // SHA1s of the scripts, loaded once
}

func newRedisBaseline(ctx context.Context, c redis.UniversalClient, ttl time.Duration) (*redisBaseline, error) {
	r := &redisBaseline{c: c, ttlMs: ttl.Milliseconds()}
	var err error
	if r.acquire, err = c.ScriptLoad(ctx, redisAcquire).Result(); err != nil {
		return nil, fmt.Errorf("load the baseline's acquire script: %w", err)
	}
	if r.release, err = c.ScriptLoad(ctx, redisRelease).Result(); err != nil {
		return nil, fmt.Errorf("load the baseline's release script: %w", err)
	}
	return r, nil
}

// redisKeys are the lock's key and its fence counter's, in one hash slot.
func redisKeys(name string) []string {
	k := "dlock-bench-baseline:{" + name + "}"
	return []string{k, k + ":fence"}
}

// try runs the acquire script: the new fence when taken, 0 when held.
func (r *redisBaseline) try(ctx context.Context, keys []string, tok string) (bool, error) {
	fence, err := r.c.EvalSha(ctx, r.acquire, keys, tok, r.ttlMs).Int64()
	return fence > 0, err
}

// unlock is the token-checked release.
func (r *redisBaseline) unlock(ctx context.Context, key, tok string) error {
	return r.c.EvalSha(ctx, r.release, []string{key}, tok).Err()
}

// attempt is one try at name with a fresh token.
func (r *redisBaseline) attempt(name string) attempt {
	keys := redisKeys(name)
	return func(ctx context.Context) (func(context.Context) error, bool, error) {
		tok := newToken()
		ok, err := r.try(ctx, keys, tok)
		if err != nil || !ok {
			return nil, false, err
		}
		return func(ctx context.Context) error { return r.unlock(ctx, keys[0], tok) }, true, nil
	}
}

// serverCPU is the Redis server process's CPU time so far (user +
// system, INFO cpu). Per-command times (INFO commandstats) would count a
// script's own commands twice, once alone and once inside the script's
// call, and would leave out the network I/O that each round trip costs
// the server; the process's CPU counts each once, and all of it.
func serverCPU(ctx context.Context, c redis.UniversalClient) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	return parseCPU(info), nil
}

// parseCPU reads the used_cpu_user and used_cpu_sys lines of INFO cpu
// (seconds, with microseconds).
func parseCPU(info string) time.Duration {
	var total time.Duration
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		secs, err := strconv.ParseFloat(v, 64)
		if err == nil {
			total += time.Duration(secs * float64(time.Second))
		}
	}
	return total
}
