package redislock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// The raw baseline is what a careful user hand-writes for a fenced lock:
// SET NX PX with a random token and INCR of a fence counter, in one
// pipeline (one round trip), and a Lua token-checked DEL to release.
var rawRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func rawCycle(c redis.UniversalClient) benchwork.Cycle {
	return func(ctx context.Context, name string) error {
		tok := newToken()
		key := "raw:{" + name + "}"
		var set *redis.BoolCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			set = p.SetNX(ctx, key, tok, 10*time.Second)
			p.Incr(ctx, key+":fence")
			return nil
		})
		if err != nil || !set.Val() {
			return fmt.Errorf("raw acquire: %v %v", set.Val(), err)
		}
		return rawRelease.Run(ctx, c, []string{key}, tok).Err()
	}
}

// luaFloor is the cheapest acquire a script can make: SET NX PX and INCR
// in one EVALSHA (no clock floor, no queue, no holder description), with
// the raw release. It is not a product; it shows what running any Lua on
// the acquire path costs against two native commands.
var luaFloor = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end
return 0`)

func luaFloorCycle(c redis.UniversalClient) benchwork.Cycle {
	return func(ctx context.Context, name string) error {
		tok := newToken()
		key := "floor:{" + name + "}"
		if n, err := luaFloor.Run(ctx, c, []string{key, key + ":fence"}, tok, 10000).Int64(); err != nil || n == 0 {
			return fmt.Errorf("lua floor acquire: %v %v", n, err)
		}
		return rawRelease.Run(ctx, c, []string{key}, tok).Err()
	}
}

func dlockCycle(l *dlock.Locker) benchwork.Cycle {
	return benchwork.AcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cost is what a run of cycles cost: wall time, this process's CPU time,
// the server's command time (INFO commandstats usec of the commands the
// client sent; a script's usec includes the calls it makes) and the
// server process's CPU time (INFO cpu: command time plus network I/O).
type cost struct {
	cycles int
	wall   time.Duration
	client time.Duration
	server time.Duration
	srvCPU time.Duration
}

func (c cost) srvCPUUs() float64 { return float64(c.srvCPU.Microseconds()) / float64(c.cycles) }

func (c cost) rate() float64     { return float64(c.cycles) / c.wall.Seconds() }
func (c cost) clientUs() float64 { return float64(c.client.Microseconds()) / float64(c.cycles) }
func (c cost) serverUs() float64 { return float64(c.server.Microseconds()) / float64(c.cycles) }
func (c *cost) add(o cost) {
	c.cycles += o.cycles
	c.wall += o.wall
	c.client += o.client
	c.server += o.server
	c.srvCPU += o.srvCPU
}
func ratio(a, b float64) float64 { return a / b }
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverUsec sums the usec in INFO commandstats of the commands named in
// top (the ones the client sends: commands that scripts call are counted
// in the script's usec too).
func serverUsec(tb testing.TB, c redis.UniversalClient, top []string) time.Duration {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var us int64
	for _, line := range strings.Split(info, "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !strings.HasPrefix(line, "cmdstat_") || !slices.Contains(top, name) {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				us += n
			}
		}
	}
	return time.Duration(us) * time.Microsecond
}

// serverCPU is the server process's CPU time so far (INFO cpu).
func serverCPU(tb testing.TB, c redis.UniversalClient) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var sec float64
	for _, line := range strings.Split(info, "\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), k); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sec += f
			}
		}
	}
	return time.Duration(sec * float64(time.Second))
}

// impl is one side of a comparison: its cycle and the commands it sends.
type impl struct {
	cycle benchwork.Cycle
	top   []string
}

// measure runs n cycles on g goroutines and returns their cost.
func measure(b *testing.B, c redis.UniversalClient, n, g int, prefix string, im impl) cost {
	s0, p0 := serverUsec(b, c, im.top), serverCPU(b, c)
	c0, t0 := processCPU(), time.Now()
	benchwork.Run(b, n, g, prefix, im.cycle)
	wall, cpu := time.Since(t0), processCPU()-c0
	return cost{cycles: n, wall: wall, client: cpu, server: serverUsec(b, c, im.top) - s0, srvCPU: serverCPU(b, c) - p0}
}

// round is how many cycles one implementation runs before the other.
const round = 1000

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and
// 64 goroutines, dlock (fair queue on, the default; and off) against the
// raw baseline on the same client, in alternating rounds of 1,000 cycles
// so that load from elsewhere on the machine hits both alike. Reports each
// side's cycles/s, server CPU per cycle (INFO commandstats, µs) and client
// CPU per cycle (this process's rusage, µs), and dlock's ratios to raw:
// ratio (throughput, higher is better), server-x (commandstats), srvcpu-x
// (server process CPU) and client-x (cost, lower is better).
func BenchmarkUncontended(b *testing.B) {
	srv := testserver.Redis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	for _, fair := range []bool{true, false} {
		l := lockerWith(b, c, redislock.Config{NoFairQueue: !fair})
		b.Cleanup(func() { _ = l.Close() })
		for _, g := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("fair=%v/G=%d", fair, g), func(b *testing.B) {
				impls := []impl{
					{dlockCycle(l), []string{"evalsha", "eval"}},
					{rawCycle(c), []string{"set", "incr", "evalsha", "eval"}},
					{luaFloorCycle(c), []string{"evalsha", "eval"}},
				}
				var sum [3]cost
				for r := 0; sum[0].cycles < b.N; r++ {
					for k := range 3 {
						i := (r + k) % 3
						sum[i].add(measure(b, c, round, g, fmt.Sprintf("u%d/%d/", i, g), impls[i]))
					}
				}
				d, raw, floor := sum[0], sum[1], sum[2]
				b.ReportMetric(ratio(floor.rate(), raw.rate()), "luafloor-ratio")
				b.ReportMetric(ratio(floor.serverUs(), raw.serverUs()), "luafloor-server-x")
				b.ReportMetric(d.rate(), "dlock-cycles/s")
				b.ReportMetric(raw.rate(), "raw-cycles/s")
				b.ReportMetric(ratio(d.rate(), raw.rate()), "ratio")
				b.ReportMetric(d.serverUs(), "dlock-server-us")
				b.ReportMetric(raw.serverUs(), "raw-server-us")
				b.ReportMetric(ratio(d.serverUs(), raw.serverUs()), "server-x")
				b.ReportMetric(d.srvCPUUs(), "dlock-srvcpu-us")
				b.ReportMetric(raw.srvCPUUs(), "raw-srvcpu-us")
				b.ReportMetric(ratio(d.srvCPUUs(), raw.srvCPUUs()), "srvcpu-x")
				b.ReportMetric(d.clientUs(), "dlock-client-us")
				b.ReportMetric(raw.clientUs(), "raw-client-us")
				b.ReportMetric(ratio(d.clientUs(), raw.clientUs()), "client-x")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// rawPoll is the raw contended baseline: a busy poll of SET NX PX + INCR
// (one pipeline) every 100 µs until granted, and the Lua release.
func rawPoll(c redis.UniversalClient, name string) benchwork.Lock {
	key := "raw:{" + name + "}"
	return func(ctx context.Context, _ int) (func(context.Context) error, error) {
		tok := newToken()
		for {
			var set *redis.BoolCmd
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				set = p.SetNX(ctx, key, tok, 5*time.Second)
				p.Incr(ctx, key+":fence")
				return nil
			})
			if err != nil {
				return nil, err
			}
			if set.Val() {
				return func(ctx context.Context) error { return rawRelease.Run(ctx, c, []string{key}, tok).Err() }, nil
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// BenchmarkContended: 16 workers on one name, each pausing 1 ms after its
// release, on one shared client: dlock with 16 Lockers (as separate
// processes would have) or one shared Locker, with the fair queue (the
// default) and without, and the raw busy poll. Reports critical sections
// per second, the handoff time (release to the next grant), the wait per
// acquire, and fairness (fewest/most critical sections of a worker).
func BenchmarkContended(b *testing.B) {
	srv := testserver.Redis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	fair, race := redislock.Config{}, redislock.Config{NoFairQueue: true}
	b.Run("raw-busy-poll", func(b *testing.B) {
		benchwork.Contended(b, 16, rawPoll(c, "contended/"+newToken())).Report(b)
	})
	b.Run("lockers=16/mode=fair", func(b *testing.B) { contended(b, c, 16, fair) })
	b.Run("lockers=16/mode=race", func(b *testing.B) { contended(b, c, 16, race) })
	b.Run("lockers=1/mode=fair", func(b *testing.B) { contended(b, c, 1, fair) })
	b.Run("lockers=1/mode=race", func(b *testing.B) { contended(b, c, 1, race) })
}

// contended runs 16 workers on n Lockers (16: one each, like separate
// processes; 1: all share one Locker and its subscription).
func contended(b *testing.B, c redis.UniversalClient, n int, cfg redislock.Config) {
	const workers = 16
	lockers := make([]*dlock.Locker, workers)
	for i := range lockers {
		if i < n {
			lockers[i] = lockerWith(b, c, cfg)
			b.Cleanup(func() { _ = lockers[i].Close() })
		} else {
			lockers[i] = lockers[i%n]
		}
	}
	benchwork.Contended(b, workers, benchwork.Acquire(lockers, "bench/contended/"+newToken(),
		dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))).Report(b)
}
