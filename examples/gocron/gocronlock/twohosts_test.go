package gocronlock_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
)

// slotsToRun is how many slots of the every-second job a two-host run
// waits for before it stops the schedulers.
const slotsToRun = 5

// Two schedulers, each with its own dlock Locker on one backend, run the
// same every-second job: each slot runs once, by the job's own count and
// by the ledger, whether host-b fires 300 ms after host-a (a DurationJob
// started on the second, and 300 ms past it) or at the same instant (a
// CronJob with seconds).
func TestEverySlotRunsOnceOnTwoSchedulers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		job   gocron.JobDefinition
		sched func() (dlock.Schedule, error)
		splay time.Duration
	}{
		{"DurationJob/host-b 300ms late", gocron.DurationJob(time.Second), func() (dlock.Schedule, error) { return dlock.Every(time.Second) }, 300 * time.Millisecond},
		{"CronJob/both on the second", gocron.CronJob("* * * * * *", true), func() (dlock.Schedule, error) { return gocronlock.Cron("* * * * * *", true) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := c.sched()
			if err != nil {
				t.Fatal(err)
			}
			url := fileURL(t)
			run := runTwoHosts(t, url, c.job, c.splay, func(dl *dlock.Locker, host string) gocron.Locker {
				return newLocker(t, dl, s, dlock.WithOwner(host))
			})
			for slot, hosts := range run.bySlot() {
				if len(hosts) != 1 {
					t.Errorf("slot %s ran %d times, on %v", slot.Format(time.RFC3339), len(hosts), hosts)
				}
			}
			checkLedger(t, url, run)
			// Each refusal is the other host's run: it held the lock, or had
			// claimed the slot. None: the hosts never contended, and the
			// test would prove nothing.
			for _, err := range run.refused {
				if !errors.Is(err, dlock.ErrSlotTaken) && !errors.Is(err, dlock.ErrNotAcquired) {
					t.Errorf("Lock failed: %v, want the slot taken or the lock held", err)
				}
			}
			if len(run.refused) == 0 {
				t.Errorf("no Lock was refused in %d runs: the two schedulers never met", len(run.ran))
			}
			t.Logf("%d runs in %d slots, %d refused Locks", len(run.ran), len(run.bySlot()), len(run.refused))
		})
	}
}

// The negative control: with a plain lock, no slot, a job shorter than
// the splay runs on both hosts in the same slot, one after the other.
func TestPlainLockRunsSlotsTwiceUnderSplay(t *testing.T) {
	t.Parallel()
	run := runTwoHosts(t, fileURL(t), gocron.DurationJob(time.Second), 300*time.Millisecond, func(dl *dlock.Locker, _ string) gocron.Locker {
		return plainLocker{dl}
	})
	twice := 0
	for _, hosts := range run.bySlot() {
		if len(hosts) > 1 {
			twice++
		}
	}
	t.Logf("a plain lock ran %d of %d slots twice", twice, len(run.bySlot()))
	if twice == 0 {
		t.Fatalf("a plain lock ran each of %d slots once: the splay did not show, and the test above would be blind", len(run.bySlot()))
	}
}

// twoHosts is what the jobs and listeners of a two-host run saw.
type twoHosts struct {
	mu      sync.Mutex
	ran     []jobRun
	refused []error
}

type jobRun struct {
	host string
	slot time.Time
}

// bySlot lists the hosts that ran each slot.
func (h *twoHosts) bySlot() map[time.Time][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[time.Time][]string{}
	for _, r := range h.ran {
		m[r.slot] = append(m[r.slot], r.host)
	}
	return m
}

// runTwoHosts runs job on two gocron schedulers, host-a's starting on a
// second and host-b's splay later, each with the gocron.Locker that locker
// makes from its own dlock Locker on url, until slotsToRun slots ran; then
// it shuts both down.
func runTwoHosts(t *testing.T, url string, job gocron.JobDefinition, splay time.Duration, locker func(*dlock.Locker, string) gocron.Locker) *twoHosts {
	t.Helper()
	every, err := dlock.Every(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	run := &twoHosts{}
	start := time.Now().Truncate(time.Second).Add(2 * time.Second)
	var scheds []gocron.Scheduler
	for i, host := range []string{"host-a", "host-b"} {
		dl := openHost(t, url, host)
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker(dl, host)))
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
		t.Cleanup(func() { _ = s.Shutdown() }) // before dl.Close, which was registered first
		task := func() {
			slot, _ := dlock.SlotAt(every, "", time.Now()) // the job's own count, by slot
			run.mu.Lock()
			run.ran = append(run.ran, jobRun{host, slot.Time})
			run.mu.Unlock()
		}
		refused := gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
			run.mu.Lock()
			run.refused = append(run.refused, err)
			run.mu.Unlock()
		})
		_, err = s.NewJob(job, gocron.NewTask(task), gocron.WithName("report"),
			gocron.WithStartAt(gocron.WithStartDateTime(start.Add(time.Duration(i)*splay))),
			gocron.WithEventListeners(refused))
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
	}
	eventually(t, "enough slots ran", func() bool { return len(run.bySlot()) >= slotsToRun })
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// checkLedger compares the run ledger with the jobs' own count: one ok
// run per slot, on the host that ran it.
func checkLedger(t *testing.T, url string, run *twoHosts) {
	t.Helper()
	runs, err := openHost(t, url, "reader").Runs(context.Background(), "report")
	if err != nil {
		t.Fatal(err)
	}
	bySlot := run.bySlot()
	var ledger []string
	for _, r := range runs {
		ledger = append(ledger, r.String())
		hosts := bySlot[r.Slot.Time]
		if r.State != dlock.RunOK || len(hosts) != 1 || hosts[0] != r.Owner {
			t.Errorf("ledger: %s; the job counted %v in that slot", r, hosts)
		}
	}
	if len(runs) != len(bySlot) {
		t.Errorf("the ledger has %d runs, the job ran in %d slots", len(runs), len(bySlot))
	}
	sort.Strings(ledger)
	t.Logf("ledger:\n%s", joinLines(ledger))
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += "  " + l + "\n"
	}
	return s
}

// plainLocker is a gocron.Locker with a dlock lock and no slot.
type plainLocker struct{ dl *dlock.Locker }

func (p plainLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lease, err := p.dl.TryAcquire(ctx, key)
	if err != nil {
		return nil, err
	}
	return plainLock{lease}, nil
}

type plainLock struct{ lease *dlock.Lease }

func (p plainLock) Unlock(ctx context.Context) error { return p.lease.Release(ctx) }
