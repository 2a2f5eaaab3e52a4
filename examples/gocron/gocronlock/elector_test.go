package gocronlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
	"github.com/go-co-op/gocron/v2"
)

// Two Electors on one backend: exactly one leads at a time, and when the
// leader's dlock Locker closes, the other takes over with a later term,
// and the deposed one's campaign ends by itself.
func TestElectorOneLeaderThenTakeover(t *testing.T) {
	ctx := context.Background()
	url := fileURL(t)
	hosts := []string{"host-a", "host-b"}
	var dls []*dlock.Locker
	var els []*gocronlock.Elector
	for _, h := range hosts {
		dl := openHost(t, url, h)
		e, err := gocronlock.NewElector(dl, "scheduler", h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		dls, els = append(dls, dl), append(els, e)
	}
	leading := func() []int {
		var l []int
		for i, e := range els {
			if e.IsLeader(ctx) == nil {
				l = append(l, i)
			}
		}
		return l
	}
	eventually(t, "one leads", func() bool { return len(leading()) > 0 })
	leader := leading()[0]
	term := els[leader].Fence()
	for range 200 {
		if l := leading(); len(l) != 1 || l[0] != leader {
			t.Fatalf("leading: %v, want only %s", l, hosts[leader])
		}
		if err := els[1-leader].IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
			t.Fatalf("the follower's IsLeader: %v, want ErrNotLeader", err)
		}
		if f := els[1-leader].Fence(); f != 0 {
			t.Fatalf("the follower's Fence: %d, want 0", f)
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := dls[leader].Close(); err != nil {
		t.Fatal(err)
	}
	next := 1 - leader
	eventually(t, hosts[next]+" leads", func() bool { return els[next].IsLeader(ctx) == nil })
	if l := leading(); len(l) != 1 || l[0] != next {
		t.Fatalf("leading after the takeover: %v, want only %s", l, hosts[next])
	}
	if f := els[next].Fence(); f <= term {
		t.Fatalf("the new term is %d, want more than the old term %d", f, term)
	}
	eventually(t, "the deposed campaign ended", func() bool {
		return errors.Is(els[leader].IsLeader(ctx), dlock.ErrInvalidArgument) // the closed Locker
	})
	t.Logf("%s led (term %d), then %s (term %d); the deposed one says: %v",
		hosts[leader], term, hosts[next], els[next].Fence(), els[leader].IsLeader(ctx))
}

// With an Elector each, two gocron schedulers run a job only on the
// leader: all of one host's runs, then, once its Locker closes, all of the
// other's.
func TestElectorRunsJobsOnTheLeaderOnly(t *testing.T) {
	url := fileURL(t)
	var mu sync.Mutex
	var ran []string
	count := func(host string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, h := range ran {
			if h == host {
				n++
			}
		}
		return n
	}
	hosts := []string{"host-a", "host-b"}
	var dls []*dlock.Locker
	var scheds []gocron.Scheduler
	for _, h := range hosts {
		dl := openHost(t, url, h)
		e, err := gocronlock.NewElector(dl, "scheduler", h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		s, err := gocron.NewScheduler(gocron.WithDistributedElector(e))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Shutdown() })
		task := func() {
			mu.Lock()
			ran = append(ran, h)
			mu.Unlock()
		}
		if _, err := s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(task)); err != nil {
			t.Fatal(err)
		}
		s.Start()
		dls, scheds = append(dls, dl), append(scheds, s)
	}
	eventually(t, "one host ran 5 times", func() bool { return count("host-a") >= 5 || count("host-b") >= 5 })
	leader := 0
	if count("host-b") >= 5 {
		leader = 1
	}
	if err := dls[leader].Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the other host ran 5 times", func() bool { return count(hosts[1-leader]) >= 5 })
	for _, s := range scheds {
		if err := s.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The leader's runs, then the other's: a run starts right after its
	// IsLeader, and the takeover needs the old term released first.
	first := 0
	for first < len(ran) && ran[first] == hosts[leader] {
		first++
	}
	for _, h := range ran[first:] {
		if h != hosts[1-leader] {
			t.Fatalf("runs: %v, want %s's, then only %s's", ran, hosts[leader], hosts[1-leader])
		}
	}
	t.Logf("runs: %v", ran)
}
