package gocronlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
)

// A second host's Lock for the slot fails while the first holds the job's
// lock, and after it finished too: the slot is taken, and the error says
// by whom.
func TestLockClaimsTheSlot(t *testing.T) {
	ctx := context.Background()
	url := fileURL(t)
	hourly, err := dlock.Every(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := newLocker(t, openHost(t, url, "host-a"), hourly, dlock.WithOwner("host-a"))
	b := newLocker(t, openHost(t, url, "host-b"), hourly, dlock.WithOwner("host-b"))

	held, err := a.Lock(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(ctx, "nightly"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("host-b's Lock while host-a runs: %v, want ErrNotAcquired", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.Lock(ctx, "nightly")
	var taken *dlock.SlotTakenError
	if !errors.As(err, &taken) || taken.Run.Owner != "host-a" || taken.Run.State != dlock.RunOK {
		t.Fatalf("host-b's Lock after host-a's run: %v, want the slot taken by host-a's ok run", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v, want the first one's nil", err)
	}
}

// The listener gives the job's error to the ledger, and calls the
// caller's own listener.
func TestLockerRecordsTheJobsError(t *testing.T) {
	url := fileURL(t)
	dl := openHost(t, url, "host-a")
	hourly, err := dlock.Every(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, dl, hourly)
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown() }()
	told := make(chan error, 1)
	_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() error { return errors.New("disk full") }), gocron.WithName("backup"),
		gocron.WithEventListeners(l.AfterJobRunsWithError(func(_ uuid.UUID, _ string, err error) { told <- err })))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if err := <-told; err == nil || err.Error() != "disk full" {
		t.Fatalf("the caller's listener got %v, want disk full", err)
	}
	var runs []dlock.Run
	eventually(t, "recorded", func() bool {
		runs, err = dl.Runs(context.Background(), "backup")
		return err == nil && len(runs) == 1 && runs[0].State != dlock.RunRunning
	})
	if runs[0].State != dlock.RunFailed || runs[0].Status != "disk full" {
		t.Fatalf("ledger: %s, want failed: disk full", runs[0])
	}
}

func TestNewLockerRejectsBadInput(t *testing.T) {
	dl := openHost(t, fileURL(t), "host-a")
	every, err := dlock.Every(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		dl       *dlock.Locker
		schedule dlock.Schedule
		opts     []dlock.Option
		want     string
	}{
		{"nil Locker", nil, every, nil, "needs a dlock.Locker"},
		{"nil schedule", dl, nil, nil, "a schedule"},
		{"bad TTL", dl, every, []dlock.Option{dlock.WithTTL(-time.Second)}, "-1s"},
		{"bad owner", dl, every, []dlock.Option{dlock.WithOwner("a\nb")}, `"a\nb"`},
	} {
		_, err := gocronlock.NewLocker(c.dl, c.schedule, c.opts...)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument naming %s", c.name, err, c.want)
		}
	}
}

func newLocker(t *testing.T, dl *dlock.Locker, s dlock.Schedule, opts ...dlock.Option) *gocronlock.Locker {
	t.Helper()
	l, err := gocronlock.NewLocker(dl, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
