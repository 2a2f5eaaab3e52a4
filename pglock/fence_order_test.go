package pglock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/pglock"
)

// TestLeaseFenceAfterBlockedGrant: a grant whose statement waited for the
// name's row while another grant and its release went through gets a
// fence above that other grant's. A fence drawn before the wait (the
// statement's proposed row) would be lower: the later grant would carry
// the lower fence, and every fenced write of its holder, or its claim of
// a scheduled run, would be refused.
func TestLeaseFenceAfterBlockedGrant(t *testing.T) {
	d := newDB(t)
	for _, c := range []struct {
		name string
		take func(ctx context.Context, l *dlock.Locker, name string) (*dlock.Lease, error)
	}{
		{"try", func(ctx context.Context, l *dlock.Locker, name string) (*dlock.Lease, error) {
			return l.TryAcquire(ctx, name)
		}},
		{"wait", func(ctx context.Context, l *dlock.Locker, name string) (*dlock.Lease, error) {
			return l.Acquire(ctx, name, dlock.WithWait(time.Minute))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := d.locker(t, pglock.Config{Mode: pglock.Lease})
			name := "fence-order-" + c.name
			ls, err := l.TryAcquire(ctx(t), name)
			if err != nil {
				t.Fatal(err)
			}
			if err := ls.Release(ctx(t)); err != nil {
				t.Fatal(err)
			}
			// Another grant in the making: its transaction holds the row.
			tx, err := d.admin.Begin(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if _, err := tx.Exec(ctx(t), `SELECT 1 FROM dlock_leases WHERE name = $1 FOR UPDATE`, name); err != nil {
				t.Fatal(err)
			}
			type result struct {
				ls  *dlock.Lease
				err error
			}
			done := make(chan result, 1)
			go func() {
				ls, err := c.take(ctx(t), l, name)
				done <- result{ls, err}
			}()
			blockedOnRow(t, d)
			// The other grant draws its fence, and is released, before the
			// blocked statement sees the row again.
			var other int64
			if err := tx.QueryRow(ctx(t), `UPDATE dlock_leases SET fence = nextval('dlock_leases_seq') WHERE name = $1 RETURNING fence`, name).Scan(&other); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx(t)); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.ls.Release(context.Background())
			if r.ls.Fence() <= uint64(other) {
				t.Errorf("granted after a grant of fence %d with fence %d, want above it", other, r.ls.Fence())
			}
		})
	}
}
