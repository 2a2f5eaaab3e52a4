package baseline

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// redisRelease is the baseline's release: DEL only if the token matches.
const redisRelease = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

// openRedis compares redislock with SET NX PX + INCR fence + Lua release.
func openRedis(ctx context.Context, u *url.URL, ttl time.Duration, opts []dlock.Option) (*Target, error) {
	rcfg, newClient, err := redisURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{
		Backend:           "redis",
		Baseline:          "SET NX PX + INCR fence + Lua token-checked release",
		BaselineContended: "busy poll of SET NX PX, then INCR and Lua release",
	}
	mk := func(rt *Counter) (redis.UniversalClient, error) {
		c := newClient()
		t.onClose(func() { _ = c.Close() })
		if err := c.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		c.AddHook(redisHook{rt})
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
	t.Base = Side{Cycle: rb.cycle, Contend: rb.contend, RoundTrips: rt}
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
// the pool dials, not on the lock.
type redisHook struct{ rt *Counter }

// setupCommands are the commands go-redis sends to set a connection up.
var setupCommands = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true}

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
	c       redis.UniversalClient
	ttl     time.Duration
	release string // SHA1 of redisRelease, loaded once
}

func newRedisBaseline(ctx context.Context, c redis.UniversalClient, ttl time.Duration) (*redisBaseline, error) {
	sha, err := c.ScriptLoad(ctx, redisRelease).Result()
	if err != nil {
		return nil, fmt.Errorf("load the baseline's release script: %w", err)
	}
	return &redisBaseline{c: c, ttl: ttl, release: sha}, nil
}

// try is SET NX PX then, when taken, INCR of the name's fence counter.
func (r *redisBaseline) try(ctx context.Context, key, tok string) (bool, error) {
	ok, err := r.c.SetNX(ctx, key, tok, r.ttl).Result()
	if err != nil || !ok {
		return false, err
	}
	return true, r.c.Incr(ctx, key+":fence").Err()
}

// unlock is the token-checked release, by EVALSHA of the loaded script.
func (r *redisBaseline) unlock(ctx context.Context, key, tok string) error {
	return r.c.EvalSha(ctx, r.release, []string{key}, tok).Err()
}

func (r *redisBaseline) cycle(ctx context.Context, name string) error {
	key, tok := keyFor(name), newToken()
	ok, err := r.try(ctx, key, tok)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("baseline: %s is held", key)
	}
	return r.unlock(ctx, key, tok)
}

// contend is the busy poll: try again at once until taken.
func (r *redisBaseline) contend(_ context.Context, _ int, name string) (benchwork.Lock, func(), error) {
	key := keyFor(name)
	return func(ctx context.Context, _ int) (func(context.Context) error, error) {
		tok := newToken()
		for {
			ok, err := r.try(ctx, key, tok)
			if err != nil {
				return nil, err
			}
			if ok {
				return func(ctx context.Context) error { return r.unlock(ctx, key, tok) }, nil
			}
			runtime.Gosched()
		}
	}, func() {}, nil
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
