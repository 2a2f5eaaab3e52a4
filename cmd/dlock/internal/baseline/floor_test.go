package baseline

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/dlockdev/dlock/redislock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// envFloor turns the floor tests on, as for TestMySQLStatementFloor.
const envFloor = "DLOCK_STATEMENT_FLOOR"

// The floor tests measure what one uncontended cycle's messages cost the
// server with no client code of either side: they record the messages a
// TryAcquire+Release of dlock's and a cycle of the baseline's send (their
// arguments, and what each answered), then send them again as they are,
// from 1 and 16 goroutines, each on a connection of its own with a name,
// key and token of its own, for floorSlice a side in alternation, and log
// dlock's rate over the baseline's. With one goroutine, where dlock sends
// a message a call as the baseline does, that ratio bounds what dlock's
// client could reach against this baseline with these messages. With 16,
// dlock's own client sends its goroutines' calls together (a pipeline, a
// statement) where the replay sends each alone: the ratio is the
// messages' cost, not a bound.
const floorSlice = time.Second

func floorOn(t *testing.T) {
	t.Helper()
	if os.Getenv(envFloor) != "1" {
		t.Skipf("set %s=1 to measure the floor of dlock's messages", envFloor)
	}
}

// message is one recorded request: its arguments and the outcome of its
// reply (see outcome), which every replay must match.
type message struct {
	args    []any
	outcome string
}

// recorder keeps the messages sent while it is on.
type recorder struct {
	on   atomic.Bool
	mu   sync.Mutex
	msgs []message
}

func (r *recorder) add(args []any, reply any) {
	if !r.on.Load() {
		return
	}
	r.mu.Lock()
	r.msgs = append(r.msgs, message{slices.Clone(args), outcome(reply)})
	r.mu.Unlock()
}

// record runs cycle on name three times, then once more recording, and
// returns that cycle's messages.
func (r *recorder) record(t *testing.T, cycle benchwork.Cycle, name string) []message {
	t.Helper()
	ctx := context.Background()
	for range 3 { // scripts and statements loaded, the name's state made
		if err := cycle(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	r.mu.Lock()
	r.msgs = nil
	r.mu.Unlock()
	r.on.Store(true)
	err := cycle(ctx, name)
	r.on.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msgs) == 0 {
		t.Fatalf("no message recorded for a cycle on %q", name)
	}
	for _, m := range r.msgs {
		t.Logf("recorded: %s", short(m.args))
	}
	return r.msgs
}

// outcome is what a reply says about the cycle, without what differs
// from one run to the next (a fence, a time, a backend pid): for a list
// or a row, its first element; a number is "0" or "n", NULL "null".
func outcome(v any) string {
	switch v := v.(type) {
	case said:
		return string(v)
	case []any:
		if len(v) == 0 {
			return "empty"
		}
		return outcome(v[0])
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(v)
	case int64:
		if v == 0 {
			return "0"
		}
		return "n"
	case int32:
		return outcome(int64(v))
	case string:
		return "string"
	}
	return fmt.Sprintf("%T", v)
}

// said is an outcome already put in words (etcdOutcome).
type said string

// tokenArg matches a token (dlock's and the baseline's: 128 random bits
// in hex), which each replayed cycle replaces by a fresh one.
var tokenArg = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

// own makes msgs goroutine i's, with token tok: name becomes name/i (in
// an etcd request's keys too), a token tok, a key of keys key+i.
func own(msgs []message, name string, i int, keys map[int64]bool, tok string) [][]any {
	out := make([][]any, len(msgs))
	for j, m := range msgs {
		args := make([]any, len(m.args))
		for k, a := range m.args {
			switch a := a.(type) {
			case string:
				a = strings.ReplaceAll(a, name, fmt.Sprintf("%s/%02d", name, i))
				args[k] = tokenArg.ReplaceAllString(a, tok)
			case etcdCall:
				args[k] = ownCall(a, name, i)
			case int64:
				if keys[a] {
					args[k] = a + int64(i)
					continue
				}
				args[k] = a
			default:
				args[k] = a
			}
		}
		out[j] = args
	}
	return out
}

// short is a message's arguments, cut for a log line.
func short(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			parts[i] = fmt.Sprintf("%q", a)
		default:
			parts[i] = fmt.Sprint(a)
		}
	}
	s := strings.Join(parts, " ")
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// variants is how many tokens each replaying goroutine takes turns with:
// more than a Postgres lease remembers of a name's released tokens (which
// it refuses), made before the replay so that its loop does no more than
// send.
const variants = 16

// replay sends msgs, made its own by each goroutine (own), in a loop from
// g goroutines for floorSlice, each with the send of a connection of its
// own (conn; done gives it back), and returns the cycles a second.
func replay(t *testing.T, msgs []message, name string, keys map[int64]bool, g int, conn func() (send func(args []any) (any, error), done func())) float64 {
	t.Helper()
	var (
		wg    sync.WaitGroup
		total atomic.Int64
	)
	start := time.Now()
	for i := range g {
		send, done := conn()
		mine := make([][][]any, variants)
		for v := range mine {
			mine[v] = own(msgs, name, i, keys, newToken())
		}
		wg.Go(func() {
			defer done()
			n := 0
			for time.Since(start) < floorSlice {
				for j, args := range mine[n%variants] {
					reply, err := send(args)
					if err != nil {
						t.Errorf("replay %s: %v", short(args), err)
						return
					}
					if got := outcome(reply); got != msgs[j].outcome {
						t.Errorf("replay %s answered %s, recorded %s", short(args), got, msgs[j].outcome)
						return
					}
				}
				n++
			}
			total.Add(int64(n))
		})
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// compareFloors replays both sides' messages in alternation, twice, from
// 1 and 16 goroutines, logs the rates and their ratio, and returns them
// as backend's rows.
func compareFloors(t *testing.T, backend string, d, b []message, dName, bName string, keys map[int64]bool,
	conn func() (func([]any) (any, error), func())) []FloorRow {
	t.Helper()
	var rows []FloorRow
	// A first replay of each side, not counted, prepares the statements
	// on every connection the measured ones use.
	replay(t, d, dName, keys, 16, conn)
	replay(t, b, bName, keys, 16, conn)
	for round := range 2 {
		for _, g := range []int{1, 16} {
			var dr, br float64
			if round%2 == 0 {
				dr = replay(t, d, dName, keys, g, conn)
				br = replay(t, b, bName, keys, g, conn)
			} else {
				br = replay(t, b, bName, keys, g, conn)
				dr = replay(t, d, dName, keys, g, conn)
			}
			t.Logf("%s, %d goroutines: dlock's messages %.0f cycles/s, the baseline's %.0f: %.2f×", backend, g, dr, br, dr/br)
			rows = append(rows, FloorRow{Backend: backend, Goroutines: g, Dlock: dr, Baseline: br})
		}
	}
	return rows
}

// redisRecorder is a go-redis hook that records every command but a
// connection's set-up.
type redisRecorder struct{ *recorder }

func (h redisRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if !setupCommands[cmd.Name()] {
			h.add(cmd.Args(), replyOf(cmd))
		}
		return err
	}
}

func (h redisRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if !setupCommands[c.Name()] {
				h.add(c.Args(), replyOf(c))
			}
		}
		return err
	}
}

// replyOf is a command's reply as a generic value.
func replyOf(c redis.Cmder) any {
	if v, ok := c.(interface{ Val() any }); ok {
		return v.Val()
	}
	if v, ok := c.(*redis.IntCmd); ok {
		return v.Val()
	}
	return fmt.Sprintf("%T", c)
}

// TestRedisScriptFloor replays an uncontended cycle's commands of dlock
// (acquire.lua and release.lua by EVALSHA) and of the baseline (its two
// scripts) on one client with no other code (see floorSlice). It is
// skipped unless DLOCK_STATEMENT_FLOOR=1.
func TestRedisScriptFloor(t *testing.T) {
	floorOn(t)
	redisFloor(t, testserver.Redis(t))
}

// redisFloor records and replays both sides' cycles on srv.
func redisFloor(t *testing.T, srv *testserver.RedisServer) []FloorRow {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		c.AddHook(redisRecorder{rec})
		return c
	}
	l, err := redislock.Config{}.Locker(newClient())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rb, err := newRedisBaseline(ctx, newClient(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dName, bName := "floor-dlock", "floor-base"
	d := rec.record(t, benchwork.TryAcquireRelease(l, dlock.WithTTL(10*time.Second)), dName)
	b := rec.record(t, cycleOf(rb.attempt), bName)
	replayer := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32})
	defer replayer.Close()
	return compareFloors(t, "redis", d, b, dName, bName, nil, func() (func([]any) (any, error), func()) {
		return func(args []any) (any, error) { return replayer.Do(ctx, args...).Result() }, func() {}
	})
}

// pgRecorder is a pgx tracer that records every statement with its
// arguments. A tracer does not see the rows: settle reads each
// statement's outcome by sending the cycle once more.
type pgRecorder struct{ *recorder }

func (p pgRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	p.add(append([]any{d.SQL}, d.Args...), nil)
	return ctx
}

func (p pgRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// settle sends msgs once, as goroutine 0's, on a connection of pool, and
// records what each answered (the first value of its row) as its
// outcome; the first, the acquire, must have been granted.
func settle(t *testing.T, pool *pgxpool.Pool, msgs []message, name string, keys map[int64]bool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for j, args := range own(msgs, name, 0, keys, newToken()) {
		v, err := firstValue(ctx, conn, args)
		if err != nil {
			t.Fatalf("%s: %v", short(args), err)
		}
		msgs[j].outcome = outcome(v)
	}
	if o := msgs[0].outcome; o != "n" && o != "true" {
		t.Fatalf("%s: the replayed acquire answered %s, not a grant", name, o)
	}
}

// TestPostgresStatementFloor replays an uncontended cycle's statements
// of dlock and of the baseline, in each mode, on pinned connections with
// no other code (see floorSlice). It is skipped unless
// DLOCK_STATEMENT_FLOOR=1.
func TestPostgresStatementFloor(t *testing.T) {
	floorOn(t)
	url := testserver.Postgres(t).NewDatabase(t)
	for _, mode := range []pglock.Mode{pglock.Advisory, pglock.Lease} {
		t.Run(string(mode), func(t *testing.T) { postgresFloor(t, url, mode) })
	}
}

// postgresFloor records and replays both sides' cycles in mode on the
// database at url.
func postgresFloor(t *testing.T, url string, mode pglock.Mode) []FloorRow {
	t.Helper()
	ctx := context.Background()
	rec := &recorder{}
	pool := func() *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 32
		cfg.ConnConfig.Tracer = pgRecorder{rec}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pcfg := pglock.Config{Mode: mode}
	dp, bp := pool(), pool()
	defer dp.Close()
	defer bp.Close()
	l, err := pcfg.Locker(dp)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var base benchwork.Cycle
	if mode == pglock.Advisory {
		base = cycleOf(pgAdvisory{bp}.attempt)
	} else {
		if _, err := bp.Exec(ctx, pgLeaseSchema); err != nil {
			t.Fatal(err)
		}
		base = cycleOf(tokenAttempts(pgLease{bp, 10000}))
	}
	dName, bName := "floor-dlock-"+string(mode), "floor-base-"+string(mode)
	d := rec.record(t, benchwork.TryAcquireRelease(l, dlock.WithTTL(10*time.Second)), dName)
	b := rec.record(t, base, bName)
	keys := map[int64]bool{}
	for _, m := range slices.Concat(d, b) {
		for _, a := range m.args {
			if k, ok := a.(int64); ok && (k == pglock.Key(dName) || k == pglock.Key(keyFor(bName))) {
				keys[k] = true
			}
		}
	}
	replayer, err := pgxpool.New(ctx, url+"&pool_max_conns=32")
	if err != nil {
		t.Fatal(err)
	}
	defer replayer.Close()
	settle(t, replayer, d, dName, keys)
	settle(t, replayer, b, bName, keys)
	return compareFloors(t, "postgres-"+string(mode), d, b, dName, bName, keys, func() (func([]any) (any, error), func()) {
		conn, err := replayer.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return func(args []any) (any, error) { return firstValue(ctx, conn, args) }, conn.Release
	})
}

// firstValue runs the statement args[0] with args[1:] and returns the
// first value of its first row (nil with no row).
func firstValue(ctx context.Context, conn *pgxpool.Conn, args []any) (any, error) {
	rows, err := conn.Query(ctx, args[0].(string), args[1:]...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var v any
	if rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		if len(vals) > 0 {
			v = vals[0]
		}
	}
	return v, rows.Err()
}
