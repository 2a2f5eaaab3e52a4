package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
)

// Locker is a gocron.Locker that runs a job at most once per slot of its
// schedule, across every scheduler whose Locker shares the backend. Give
// it to a scheduler (gocron.WithDistributedLocker) when all its jobs share
// one schedule, or to each job (gocron.WithDistributedJobLocker) with that
// job's schedule.
//
// The slot of a run is the schedule point nearest the time gocron calls
// Lock, by this host's clock. Schedulers that fire the same point up to
// half the gap between two points apart name the same slot, so the first
// to claim it runs the job and the others skip it: that is how Locker
// handles the time splay between schedulers that gocron leaves to it. Start
// a DurationJob on a multiple of its period (gocron.WithStartAt), so that
// its runs fall on the points of dlock.Every(period).
//
// gocron does not pass the job's error to Unlock: add the listener of
// AfterJobRunsWithError to each job for the ledger to record it; without
// it, every run that ends is recorded as ok. gocron gives a locker no way
// to stop a running job either: if the lease is lost while the job runs,
// the ledger records the loss, but the job runs on.
type Locker struct {
	dl       *dlock.Locker
	schedule dlock.Schedule
	opts     []dlock.Option

	mu      sync.Mutex
	running map[string]*lock // by job name: at most one, the dlock lock held
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker that runs each job once per slot of schedule
// (dlock.Every(period), or Cron's crontab) under the dlock lock of the
// job's name, taken from dl. opts apply to every lock and claim:
// dlock.WithOwner names this host in the ledger, dlock.WithTTL bounds how
// long a crashed host holds a job, dlock.WithRetryCrashed runs a crashed
// run's slot again, dlock.WithKeepRuns bounds the ledger. A nil dl or
// schedule, or a bad option, is an error matching dlock.ErrInvalidArgument.
func NewLocker(dl *dlock.Locker, schedule dlock.Schedule, opts ...dlock.Option) (*Locker, error) {
	if dl == nil || schedule == nil {
		return nil, fmt.Errorf("gocronlock: NewLocker needs a dlock.Locker and a schedule: %w", dlock.ErrInvalidArgument)
	}
	// Making an election validates opts as every acquire does, and touches
	// no backend: a bad option fails here, not at each of gocron's runs.
	if _, err := dl.Election("gocronlock", opts...); err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	return &Locker{dl: dl, schedule: schedule, opts: opts, running: map[string]*lock{}}, nil
}

// Lock takes the lock of the job named key and claims the slot of the run
// due now. It fails when another host holds the lock (dlock.ErrNotAcquired)
// or has claimed the slot (a *dlock.SlotTakenError, matching
// dlock.ErrSlotTaken, that names the run), and gocron then skips the run.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	slot, err := dlock.SlotAt(l.schedule, "", time.Now())
	if err != nil {
		return nil, fmt.Errorf("gocronlock: job %q: %w", key, err)
	}
	lease, err := l.dl.TryAcquire(ctx, key, l.opts...)
	if err != nil {
		return nil, fmt.Errorf("gocronlock: job %q, slot %s: %w", key, slot, err)
	}
	run, err := l.dl.ClaimSlot(ctx, lease, slot, l.opts...)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	k := &lock{owner: l, lease: lease, run: run}
	l.mu.Lock()
	l.running[key] = k
	l.mu.Unlock()
	return k, nil
}

// AfterJobRunsWithError returns a gocron event listener that gives a
// job's error to the run ledger (the run is recorded failed, with the
// error's text), then calls then, if not nil: gocron keeps one such
// listener per job. Add it to each job with gocron.WithEventListeners.
func (l *Locker) AfterJobRunsWithError(then func(jobID uuid.UUID, jobName string, err error)) gocron.EventListener {
	return gocron.AfterJobRunsWithError(func(jobID uuid.UUID, jobName string, err error) {
		l.mu.Lock()
		if k, ok := l.running[jobName]; ok {
			k.jobErr = err
		}
		l.mu.Unlock()
		if then != nil {
			then(jobID, jobName, err)
		}
	})
}

// ended forgets k and returns the job's error, if the listener gave one.
func (l *Locker) ended(k *lock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[k.lease.Name()] == k {
		delete(l.running, k.lease.Name())
	}
	return k.jobErr
}

// lock is one run's hold on its job's lock and slot.
type lock struct {
	owner  *Locker
	lease  *dlock.Lease
	run    dlock.Run
	jobErr error // guarded by owner.mu

	once sync.Once
	err  error
}

// Unlock records the run's outcome in the ledger (ok, the job's error, or
// the lease's loss) and releases the lock. It works after ctx is done, and
// a second call returns the first one's result.
func (k *lock) Unlock(ctx context.Context) error {
	k.once.Do(func() { k.err = k.unlock(context.WithoutCancel(ctx)) })
	return k.err
}

func (k *lock) unlock(ctx context.Context) error {
	jobErr := k.owner.ended(k)
	_, err := k.owner.dl.FinishRun(ctx, k.lease, k.run, jobErr)
	if jobErr != nil && err == jobErr {
		err = nil // the job's own error is gocron's to report, and recorded
	}
	if relErr := k.lease.Release(ctx); relErr != nil && !errors.Is(relErr, dlock.ErrLost) {
		err = errors.Join(err, relErr)
	}
	return err
}
