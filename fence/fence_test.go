package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencetest"
)

func TestMain(m *testing.M) { dlocktest.Main(m) }

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		offered, current uint64
		stale            bool
	}{{33, 34, true}, {34, 34, false}, {35, 34, false}, {1, 0, false}} {
		err := fence.Check("k", c.offered, c.current)
		if got := errors.Is(err, fence.ErrStale); got != c.stale {
			t.Errorf("Check(%d, %d) = %v, want stale %v", c.offered, c.current, err, c.stale)
		}
	}
	var se *fence.StaleError
	err := fence.Check("acct", 33, 34)
	if !errors.As(err, &se) || se.Offered != 33 || se.Current != 34 || se.Key != "acct" {
		t.Fatalf("Check = %#v", err)
	}
	if !strings.Contains(err.Error(), "33") || !strings.Contains(err.Error(), "34") {
		t.Errorf("message %q does not name both fences", err)
	}
}

func TestValid(t *testing.T) {
	if err := fence.Valid(0, 0); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Valid(0) = %v, want ErrInvalidArgument", err)
	}
	if err := fence.Valid(fence.MaxSQL+1, fence.MaxSQL); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Valid(MaxSQL+1) = %v, want ErrInvalidArgument", err)
	}
	if err := fence.Valid(fence.MaxSQL, fence.MaxSQL); err != nil {
		t.Errorf("Valid(MaxSQL) = %v", err)
	}
}

func TestGuard(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		var (
			g   fence.Guard
			mu  sync.Mutex
			val string
		)
		return fencetest.Store{
			Write: func(_ context.Context, f uint64, v string) error {
				return g.Do("k", f, func() error { mu.Lock(); val = v; mu.Unlock(); return nil })
			},
			Read: func(context.Context) (string, uint64, bool, error) {
				mu.Lock()
				defer mu.Unlock()
				f, _ := strconv.ParseUint(strings.SplitN(val, "/", 2)[0], 10, 64)
				return val, f, val != "", nil
			},
		}
	})
}

func TestGuardRejectsZero(t *testing.T) {
	var g fence.Guard
	if err := g.Admit("k", 0); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("Admit(0) = %v", err)
	}
}

// A paused holder (fence 33) resumes after a newer grant (fence 34) has
// written: its write is rejected, while the newer holder may write again
// under its own grant.
func Example() {
	var g fence.Guard // in production: pgfence, redisfence or sqlitefence
	balance := 0
	write := func(f uint64, amount int) {
		err := g.Do("account:42", f, func() error { balance += amount; return nil })
		var stale *fence.StaleError
		switch {
		case errors.As(err, &stale):
			fmt.Printf("fence %d rejected (current %d)\n", stale.Offered, stale.Current)
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Printf("fence %d wrote, balance %d\n", f, balance)
		}
	}
	write(34, 100) // B, the newer grant
	write(34, 5)   // B again: equal fences are accepted
	write(33, 100) // A, paused past its TTL, resumes
	// Output:
	// fence 34 wrote, balance 100
	// fence 34 wrote, balance 105
	// fence 33 rejected (current 34)
}
