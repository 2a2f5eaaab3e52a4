package filelock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestConcurrentAttemptsOneWinner: many tokens trying one free name at
// once in one process: exactly one wins, and every other attempt names the
// winner (its owner and fence) as the holder.
func TestConcurrentAttemptsOneWinner(t *testing.T) {
	d, _ := testDriver(t)
	const n = 40
	grants := make([]driver.Grant, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := driver.Request{Name: "n", Token: fmt.Sprint("t", i), Owner: fmt.Sprint("o", i), TTL: time.Minute}
			grants[i], errs[i] = d.TryAcquire(context.Background(), req)
		})
	}
	wg.Wait()
	winner := -1
	for i, g := range grants {
		if errs[i] != nil {
			t.Fatalf("attempt %d: %v", i, errs[i])
		}
		if g.Acquired {
			if winner >= 0 {
				t.Fatalf("attempts %d and %d both acquired", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no attempt acquired the free name")
	}
	for i, g := range grants {
		if i != winner && (g.Holder.Owner != fmt.Sprint("o", winner) || g.Holder.Fence != grants[winner].Fence || g.Holder.TTL <= 0) {
			t.Errorf("attempt %d saw holder %+v, want o%d with fence %d", i, g.Holder, winner, grants[winner].Fence)
		}
	}
}

// TestFlightLeaderCanceled: an attempt sharing a flight whose leader's
// context is canceled makes its own attempt instead of failing.
func TestFlightLeaderCanceled(t *testing.T) {
	var fs flights
	leaderIn, leaderOut := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = fs.do(context.Background(), driver.Request{Name: "n", Token: "a"}, func() (driver.Grant, error) {
			close(leaderIn)
			<-leaderOut
			return driver.Grant{}, context.Canceled
		})
	}()
	<-leaderIn
	got := make(chan driver.Grant, 1)
	go func() {
		g, _ := fs.do(context.Background(), driver.Request{Name: "n", Token: "b"}, func() (driver.Grant, error) {
			return driver.Grant{Acquired: true, Fence: 7}, nil
		})
		got <- g
	}()
	time.Sleep(20 * time.Millisecond) // let b join a's flight
	close(leaderOut)
	if g := <-got; !g.Acquired || g.Fence != 7 {
		t.Fatalf("follower got %+v, want its own attempt's grant", g)
	}
}
