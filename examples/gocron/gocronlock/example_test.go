package gocronlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
)

// Two hosts' schedulers run the same daily job: the first runs the day's
// slot, and the second, arriving later for the same slot, skips it.
func ExampleLocker() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gocronlock-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := "file://" + filepath.Join(dir, "dlock.db") // or redis://, postgres://...
	daily, err := dlock.Every(24 * time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	for _, host := range []string{"host-a", "host-b"} {
		dl, err := dlock.Open(ctx, url, dlock.WithOwner(host))
		if err != nil {
			log.Fatal(err)
		}
		locker, err := gocronlock.NewLocker(dl, daily)
		if err != nil {
			log.Fatal(err)
		}
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			log.Fatal(err)
		}
		done := make(chan struct{})
		report := func() { fmt.Println(host, "runs the report") }
		skipped := func(_ uuid.UUID, _ string, err error) {
			var taken *dlock.SlotTakenError
			if errors.As(err, &taken) {
				fmt.Println(host, "skips it: the slot ran on", taken.Run.Owner)
			}
			close(done)
		}
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), gocron.NewTask(report),
			gocron.WithName("daily-report"),
			gocron.WithEventListeners(
				locker.AfterJobRunsWithError(nil), // the ledger records the job's error
				gocron.AfterJobRuns(func(uuid.UUID, string) { close(done) }),
				gocron.AfterLockError(skipped)))
		if err != nil {
			log.Fatal(err)
		}
		s.Start()
		<-done
		_ = s.Shutdown() // waits for the run to end and record its outcome
		_ = dl.Close()
	}
	// Output:
	// host-a runs the report
	// host-b skips it: the slot ran on host-a
}

// Only the leader's scheduler runs jobs; when its term ends, here by
// closing its dlock Locker, another host's Elector wins the next one.
func ExampleElector() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gocronlock-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := "file://" + filepath.Join(dir, "dlock.db")
	var electors []*gocronlock.Elector
	var lockers []*dlock.Locker
	for _, host := range []string{"host-a", "host-b"} {
		dl, err := dlock.Open(ctx, url, dlock.WithOwner(host))
		if err != nil {
			log.Fatal(err)
		}
		defer dl.Close()
		e, err := gocronlock.NewElector(dl, "scheduler", host)
		if err != nil {
			log.Fatal(err)
		}
		defer e.Close()
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
		if err != nil {
			log.Fatal(err)
		}
		defer func() { _ = s.Shutdown() }()
		for host == "host-a" && e.IsLeader(ctx) != nil {
			time.Sleep(10 * time.Millisecond) // host-a campaigns first
		}
		electors, lockers = append(electors, e), append(lockers, dl)
	}
	fmt.Println("host-a leads:", electors[0].IsLeader(ctx) == nil, "- host-b leads:", electors[1].IsLeader(ctx) == nil)
	_ = lockers[0].Close() // host-a's term ends
	for electors[1].IsLeader(ctx) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("host-a leads:", electors[0].IsLeader(ctx) == nil, "- host-b leads:", electors[1].IsLeader(ctx) == nil)
	// Output:
	// host-a leads: true - host-b leads: false
	// host-a leads: false - host-b leads: true
}
