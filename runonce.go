package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// DefaultKeepRuns is how many slots of a name the run ledger keeps when
// WithKeepRuns is not given.
const DefaultKeepRuns = 100

// ErrSlotTaken is returned by RunOnce when the slot has a run already: it
// ran (wherever it ran), it is running, or its runner crashed (without
// WithRetryCrashed). errors.As with a *SlotTakenError says which, where
// and how it ended.
var ErrSlotTaken = errors.New("dlock: slot taken")

// RunState says where a recorded run stands.
type RunState string

// Run states.
const (
	// RunRunning: no outcome yet, and its runner still holds the lock.
	RunRunning RunState = "running"
	// RunOK: the job ended without an error.
	RunOK RunState = "ok"
	// RunFailed: the job ended with an error (Status says which), or its
	// lease was lost while it ran.
	RunFailed RunState = "failed"
	// RunCrashed: no outcome, and its runner's lease is gone: the runner
	// died (SIGKILL, a crashed host) before it could record one.
	RunCrashed RunState = "crashed"
)

// Run is one recorded run of a scheduled job (Locker.RunOnce, Locker.Runs).
type Run struct {
	Name string
	Slot Slot
	// Owner is the holder that ran it (host/pid by default), Fence the
	// grant it ran under, Attempt 1 (or more: a crashed run run again).
	Owner   string
	Fence   uint64
	Attempt int
	// Started and Ended are by the runner's clock; Ended is zero while it
	// runs, and for ever if its runner crashed.
	Started, Ended time.Time
	// Status is the outcome: "ok", the job's error ("exit status 3"), or
	// "lease lost: ..."; empty without one.
	Status string
	State  RunState
}

// stamp formats t as Run.String shows a run's times: UTC, milliseconds.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// String describes the run in one line: "slot 2026-12-05T02:00:00Z ran
// on host-a/412 (fence 7) from 02:00:00 to 02:00:03: ok".
func (r Run) String() string {
	s := fmt.Sprintf("slot %s ", r.Slot)
	switch r.State {
	case RunRunning:
		s += fmt.Sprintf("is running on %s (fence %d) since %s", r.Owner, r.Fence, stamp(r.Started))
	case RunCrashed:
		s += fmt.Sprintf("was started on %s (fence %d) at %s, which crashed before it recorded an outcome", r.Owner, r.Fence, stamp(r.Started))
	default:
		s += fmt.Sprintf("ran on %s (fence %d) from %s to %s: %s", r.Owner, r.Fence, stamp(r.Started), stamp(r.Ended), r.Status)
	}
	if r.Attempt > 1 {
		s += fmt.Sprintf(" (attempt %d)", r.Attempt)
	}
	return s
}

// SlotTakenError reports the run that has the slot. It matches
// ErrSlotTaken with errors.Is.
type SlotTakenError struct{ Run Run }

// Error says which run has the slot, where and how it ended.
func (e *SlotTakenError) Error() string {
	return fmt.Sprintf("dlock: %q: %s", e.Run.Name, e.Run)
}

// Is reports whether target is ErrSlotTaken.
func (e *SlotTakenError) Is(target error) bool { return target == ErrSlotTaken }

// RunOnce runs fn under the lock name at most once for slot, across every
// process and host that shares the backend: the first to claim the slot
// in the backend's run ledger (driver.Ledger) runs fn; every other caller
// for the same slot — while it runs or long after it ended — gets a
// *SlotTakenError naming who ran it, under which fence, when, and how it
// ended. The claim and the outcome are written with the grant's fence, so
// a runner that lost its lock while paused cannot overwrite its
// successor's record.
//
// A lock held by someone else is ErrNotAcquired as for Acquire (with the
// usual wait), unless the ledger already records the slot: then it is the
// slot's *SlotTakenError. fn gets a context canceled when the lease is
// lost; RunOnce waits for it, records its outcome ("ok", its error, or
// the loss), and releases the lock (after WithMinHold's minimum, if
// given). A runner that dies mid-run leaves a record without an outcome,
// a crashed run: the slot is not run again (at most once) unless
// WithRetryCrashed is given, and then once its lease is gone (at least
// once). The ledger keeps the newest WithKeepRuns slots of a name
// (DefaultKeepRuns). Backends without a ledger give ErrUnsupported.
func (l *Locker) RunOnce(ctx context.Context, name string, slot Slot, fn func(ctx context.Context, lease *Lease) error, opts ...Option) (Run, error) {
	if err := l.usable(); err != nil {
		return Run{}, err
	}
	if fn == nil {
		return Run{}, invalid("nil function given to RunOnce")
	}
	if slot.Time.IsZero() {
		return Run{}, invalid("slot has no time (see SlotAt)")
	}
	s, err := l.settingsFor(name, opts)
	if err != nil {
		return Run{}, err
	}
	ledger, ok := l.drv.(driver.Ledger)
	if !ok {
		return Run{}, fmt.Errorf("dlock: run %q once: this backend keeps no run ledger: %w", name, ErrUnsupported)
	}
	lease, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		if errors.Is(err, ErrNotAcquired) {
			if r, ok, lerr := l.slotRun(ctx, ledger, name, slot); lerr == nil && ok {
				return Run{}, &SlotTakenError{r}
			}
		}
		return Run{}, err
	}
	r, err := l.claim(ctx, ledger, lease, slot, s)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return r, err
	}
	released := false
	defer func() {
		if !released { // fn panicked: free the lock before the panic goes on
			_ = lease.Release(context.WithoutCancel(ctx))
		}
	}()
	fnErr := fn(lease.Context(ctx), lease)
	holdAtLeast(ctx, lease, r.Started.Add(s.minHold), l.clock)
	r, err = l.finish(ctx, ledger, lease, r, fnErr)
	released = true
	if relErr := lease.Release(context.WithoutCancel(ctx)); err == nil {
		err = relErr
	}
	return r, err
}

// ClaimSlot claims slot for lease (held on the lock the job runs under)
// in the run ledger: the first step of RunOnce, for callers that keep the
// lease themselves (a command supervisor, a scheduler's own locker). It
// returns the claimed run, or a *SlotTakenError with the run that has the
// slot (WithRetryCrashed and WithKeepRuns apply). Record the outcome with
// FinishRun, then release the lease.
func (l *Locker) ClaimSlot(ctx context.Context, lease *Lease, slot Slot, opts ...Option) (Run, error) {
	if lease == nil || slot.Time.IsZero() {
		return Run{}, invalid("ClaimSlot needs a lease and a slot with a time")
	}
	s, err := l.settingsFor(lease.Name(), opts)
	if err != nil {
		return Run{}, err
	}
	ledger, ok := l.drv.(driver.Ledger)
	if !ok {
		return Run{}, fmt.Errorf("dlock: claim a slot of %q: this backend keeps no run ledger: %w", lease.Name(), ErrUnsupported)
	}
	return l.claim(ctx, ledger, lease, slot, s)
}

// FinishRun records the outcome of r, claimed with ClaimSlot under lease:
// "ok", jobErr's text, or the lease's loss. It returns the finished run,
// and jobErr joined with the loss, if any. Call it before releasing the
// lease: the record is written under the lease's fence.
func (l *Locker) FinishRun(ctx context.Context, lease *Lease, r Run, jobErr error) (Run, error) {
	ledger, ok := l.drv.(driver.Ledger)
	if !ok || lease == nil {
		return r, invalid("FinishRun needs a lease on a backend with a run ledger")
	}
	return l.finish(ctx, ledger, lease, r, jobErr)
}

// claim records the slot's run for lease, or returns the run that has it.
func (l *Locker) claim(ctx context.Context, ledger driver.Ledger, lease *Lease, slot Slot, s settings) (Run, error) {
	rec := driver.RunRecord{Name: lease.Name(), Slot: slot.Time.UTC(), Schedule: slot.Schedule, Owner: lease.Owner(),
		Fence: lease.Fence(), Attempt: 1, Started: l.clock.Now()}
	got, claimed, err := ledger.ClaimRun(ctx, rec, false, s.keepRuns)
	if err == nil && !claimed && got.Ended.IsZero() && got.Fence < rec.Fence && s.retryCrashed {
		// The slot's runner has no outcome and its lease is gone (this one
		// holds the lock now): it crashed. Run it again.
		rec.Attempt = got.Attempt + 1
		got, claimed, err = ledger.ClaimRun(ctx, rec, true, s.keepRuns)
	}
	if err != nil {
		return Run{}, backend("claim a run", lease.Name(), err)
	}
	r := runFrom(got)
	if !claimed {
		if r.State == "" {
			r.State = RunCrashed // no outcome, and lease holds the lock now
		}
		return r, &SlotTakenError{r}
	}
	r.State = RunRunning
	return r, nil
}

// finish records r's outcome under lease's fence.
func (l *Locker) finish(ctx context.Context, ledger driver.Ledger, lease *Lease, r Run, fnErr error) (Run, error) {
	lostErr := lease.Err()
	r.Ended, r.Status, r.State = l.clock.Now(), "ok", RunOK
	switch {
	case errors.Is(lostErr, ErrLost):
		r.Status, r.State = "lease lost: "+lostReasonOf(lostErr), RunFailed
		fnErr = errors.Join(fnErr, lostErr)
	case fnErr != nil:
		r.Status, r.State = clip(fnErr.Error()), RunFailed
	}
	rec := driver.RunRecord{Name: r.Name, Slot: r.Slot.Time, Schedule: r.Slot.Schedule, Owner: r.Owner, Fence: r.Fence,
		Attempt: r.Attempt, Started: r.Started, Ended: r.Ended, Status: r.Status}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := ledger.FinishRun(fctx, rec); err != nil && fnErr == nil {
		return r, backend("record a run's outcome", r.Name, err)
	}
	return r, fnErr
}

// finishTimeout bounds recording a run's outcome after the job, whose own
// context may be done by then.
const finishTimeout = 10 * time.Second

// holdAtLeast keeps lease until until (WithMinHold), or until it is lost
// or ctx is done.
func holdAtLeast(ctx context.Context, lease *Lease, until time.Time, clock Clock) {
	wait := until.Sub(clock.Now())
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-lease.Done():
	case <-ctx.Done():
	}
}

func lostReasonOf(err error) string {
	var le *LostError
	if errors.As(err, &le) {
		return le.Reason
	}
	return err.Error()
}

// slotRun reads the slot's record from the ledger, if any.
func (l *Locker) slotRun(ctx context.Context, ledger driver.Ledger, name string, slot Slot) (Run, bool, error) {
	runs, err := l.runs(ctx, ledger, name)
	if err != nil {
		return Run{}, false, err
	}
	for _, r := range runs {
		if r.Slot.Time.Equal(slot.Time) {
			return r, true, nil
		}
	}
	return Run{}, false, nil
}

// Runs returns the run ledger's records of name, newest slot first, each
// with its State: a run without an outcome is running while its runner's
// fence still holds the lock, crashed otherwise. MissedSlots tells which
// slots no host ran. Backends without a ledger give ErrUnsupported.
func (l *Locker) Runs(ctx context.Context, name string) ([]Run, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	ledger, ok := l.drv.(driver.Ledger)
	if !ok {
		return nil, fmt.Errorf("dlock: runs of %q: this backend keeps no run ledger: %w", name, ErrUnsupported)
	}
	return l.runs(ctx, ledger, name)
}

func (l *Locker) runs(ctx context.Context, ledger driver.Ledger, name string) ([]Run, error) {
	recs, err := ledger.Runs(ctx, name)
	if err != nil {
		return nil, backend("list runs", name, err)
	}
	var holder uint64
	if h, ok, err := l.Inspect(ctx, name); err == nil && ok {
		holder = h.Fence
	}
	runs := make([]Run, len(recs))
	for i, rec := range recs {
		runs[i] = runFrom(rec)
		if runs[i].State == "" {
			runs[i].State = RunCrashed
			if rec.Fence == holder {
				runs[i].State = RunRunning
			}
		}
	}
	return runs, nil
}

// runFrom converts a ledger record; State is left empty for a record
// without an outcome, which only the lock's holder can tell apart.
func runFrom(rec driver.RunRecord) Run {
	r := Run{Name: rec.Name, Slot: Slot{rec.Slot, rec.Schedule}, Owner: rec.Owner, Fence: rec.Fence,
		Attempt: rec.Attempt, Started: rec.Started, Ended: rec.Ended, Status: rec.Status}
	switch {
	case rec.Ended.IsZero():
	case rec.Status == "ok":
		r.State = RunOK
	default:
		r.State = RunFailed
	}
	return r
}

// MissedSlots returns the points of s from the oldest recorded run's slot
// up to until that have no record in runs (newest first, as Runs returns
// them): the slots no host ran. Runs of other schedules are ignored.
func MissedSlots(s Schedule, runs []Run, until time.Time) []time.Time {
	if len(runs) == 0 {
		return nil
	}
	have := map[int64]bool{}
	oldest := runs[0].Slot.Time
	for _, r := range runs {
		have[r.Slot.Time.UnixNano()] = true
		if r.Slot.Time.Before(oldest) {
			oldest = r.Slot.Time
		}
	}
	var missed []time.Time
	for p := oldest; !p.After(until) && len(missed) < DefaultKeepRuns; {
		if !have[p.UnixNano()] {
			missed = append(missed, p.UTC())
		}
		next := s.Next(p)
		if !next.After(p) {
			break
		}
		p = next
	}
	return missed
}
