package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// EnvSlots sets how many slots the suite's RunOnce/Skew test runs (default
// 3, which `make test` runs): `make slots` runs 30 on every backend.
const EnvSlots = "DLOCKTEST_SLOTS"

// slotCount is the number of slots RunOnce/Skew runs.
func slotCount(t *testing.T) int {
	n := 3
	if v := os.Getenv(EnvSlots); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of slots", EnvSlots, v)
		}
	}
	return n
}

// skews are the clock offsets of the five runner processes, as fractions
// of the period: up to 40 % of it either way.
var skews = []float64{-0.4, -0.2, 0, 0.2, 0.4}

// testRunOnceSkew: five OS processes whose clocks are off by up to ±40 %
// of the period (dlock.WithClock) fire a 10 ms job at every slot by their
// own clocks, as five hosts' crons would: each slot runs exactly once, in
// the run ledger and in the job's own output.
func (s *suite) testRunOnceSkew(t *testing.T) {
	s.needProcesses(t)
	n := slotCount(t)
	period := max(2*s.ttl, 2*time.Second)
	name := s.name(t)
	out := t.TempDir() + "/ran"
	first := time.Now().Add(3 * time.Second).Truncate(period).Add(period)
	children := make([]*child, len(skews))
	for i, f := range skews {
		children[i] = s.startChild(t, childSpec{Role: roleSlots, Names: []string{name}, File: out, N: n,
			Period: period, Skew: time.Duration(f * float64(period)), First: first.UnixNano()})
	}
	for _, c := range children {
		c.wait(t, time.Until(first)+time.Duration(n+4)*period+s.slack())
	}
	ran := ranPerSlot(t, out)
	runs, err := s.locker(t).Runs(s.ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	doubles, misses := 0, 0
	for k := range n {
		slot := first.Add(time.Duration(k) * period).UTC().Format(time.RFC3339Nano)
		switch ran[slot] {
		case 0:
			misses++
			t.Errorf("slot %s: the job never ran", slot)
		case 1:
		default:
			doubles++
			t.Errorf("slot %s: the job ran %d times", slot, ran[slot])
		}
	}
	if len(ran) != n {
		t.Errorf("the job ran for %d slots, want the %d scheduled: %v", len(ran), n, ran)
	}
	if len(runs) != n {
		t.Errorf("the ledger has %d runs, want %d", len(runs), n)
	}
	for _, r := range runs {
		if r.State != dlock.RunOK || ran[r.Slot.String()] != 1 {
			t.Errorf("ledger run %s, want ok and matching the job's one run of its slot", r)
		}
	}
	t.Logf("%d processes, clocks off by up to ±40%% of the %s period: %d slots, %d runs in the job's output, %d in the ledger, %d doubles, %d misses",
		len(skews), period, n, sum(ran), len(runs), doubles, misses)
}

// ranPerSlot counts the job's runs by slot in its output file.
func ranPerSlot(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if slot, _, ok := strings.Cut(line, " "); ok {
			ran[slot]++
		}
	}
	return ran
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// testRunOnceKilled: a runner SIGKILLed mid-job leaves a crashed run; the
// slot is not run again by default, and exactly once more with
// WithRetryCrashed, once the killed runner's lease is gone.
func (s *suite) testRunOnceKilled(t *testing.T) {
	s.needProcesses(t)
	name := s.name(t)
	slot := s.slot(t, 30)
	c := s.startChild(t, childSpec{Role: roleSlotHang, Names: []string{name}, First: slot.Time.UnixNano()})
	if line := c.line(t, time.Minute); line != "running" {
		t.Fatalf("child said %q, want running", line)
	}
	c.kill()
	l := s.locker(t)
	ctx := s.ctx(t)
	wait := s.opts(dlock.WithWait(s.longTTL()))
	_, err := l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error {
		t.Error("a crashed slot ran again without WithRetryCrashed")
		return nil
	}, wait...)
	var taken *dlock.SlotTakenError
	if !errors.As(err, &taken) || taken.Run.State != dlock.RunCrashed {
		t.Fatalf("RunOnce after the runner was killed = %v, want the crashed run", err)
	}
	reruns := 0
	for range 2 {
		_, err = l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error {
			reruns++
			return nil
		}, append(wait, dlock.WithRetryCrashed(true))...)
	}
	if reruns != 1 || !errors.Is(err, dlock.ErrSlotTaken) {
		t.Errorf("with WithRetryCrashed the slot ran %d more times (last: %v), want exactly one rerun", reruns, err)
	}
	runs, err := l.Runs(ctx, name)
	if err != nil || len(runs) != 1 || runs[0].Attempt != 2 || runs[0].State != dlock.RunOK {
		t.Errorf("Runs = %+v, %v; want the one slot, attempt 2, ok", runs, err)
	}
}

// offsetClock is the host's clock off by a constant: a host whose clock
// is wrong.
type offsetClock struct{ off time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.off) }

func (c offsetClock) NewTimer(d time.Duration) dlock.Timer { return hostTimer{time.NewTimer(d)} }

type hostTimer struct{ t *time.Timer }

func (t hostTimer) C() <-chan time.Time        { return t.t.C }
func (t hostTimer) Stop() bool                 { return t.t.Stop() }
func (t hostTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// slots is the child's side of testRunOnceSkew: N slots of Period from
// First, each fired when its own clock (off by Skew) reads the slot's
// time, as cron does, running a 10 ms job once per slot.
func (c childSpec) slots(ctx context.Context) error {
	clock := offsetClock{c.Skew}
	l, err := dlock.Open(ctx, c.URL, dlock.WithClock(clock))
	if err != nil {
		return err
	}
	defer l.Close()
	every, err := dlock.Every(c.Period)
	if err != nil {
		return err
	}
	for k := range c.N {
		point := time.Unix(0, c.First).Add(time.Duration(k) * c.Period)
		time.Sleep(time.Until(point.Add(-c.Skew)))
		slot, err := dlock.SlotAt(every, "", clock.Now())
		if err != nil {
			return err
		}
		_, err = l.RunOnce(ctx, c.Names[0], slot, func(context.Context, *dlock.Lease) error {
			f, err := os.OpenFile(c.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(f, "%s %d\n", slot, os.Getpid())
			time.Sleep(10 * time.Millisecond)
			return errors.Join(err, f.Close())
		}, dlock.WithWait(0), dlock.WithTTL(c.TTL))
		if err != nil && !errors.Is(err, dlock.ErrSlotTaken) && !errors.Is(err, dlock.ErrNotAcquired) {
			return fmt.Errorf("slot %s: %w", slot, err)
		}
	}
	return nil
}

// slotHang is the child's side of testRunOnceKilled: it claims the slot
// at First and hangs in its job until it is killed.
func (c childSpec) slotHang(ctx context.Context, l *dlock.Locker) error {
	_, err := l.RunOnce(ctx, c.Names[0], dlock.Slot{Time: time.Unix(0, c.First).UTC(), Schedule: "every 1m0s"},
		func(ctx context.Context, _ *dlock.Lease) error {
			fmt.Println("running")
			<-ctx.Done()
			return ctx.Err()
		}, c.opts()...)
	return err
}
