package mysqllock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
)

// modes are both modes' default configs.
var modes = []mysqllock.Config{{}, {Mode: mysqllock.GetLock}}

// minute is the slot m minutes into a fixed day.
func minute(m int) time.Time {
	return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

// run is a record of name's slot m claimed under fence, without an outcome.
func run(name string, m int, fence uint64, owner string) driver.RunRecord {
	return driver.RunRecord{Name: name, Slot: minute(m), Schedule: "every 1m0s", Owner: owner, Fence: fence,
		Attempt: 1, Started: time.Now()}
}

func ledgerOf(t *testing.T, l *dlock.Locker) driver.Ledger {
	t.Helper()
	g, ok := l.Driver().(driver.Ledger)
	if !ok {
		t.Fatalf("%T does not implement driver.Ledger", l.Driver())
	}
	return g
}

// stored reads name's records as the database has them: "minute:owner:
// fence:attempt:status" ("-" for no outcome), newest slot first, and the
// highest fence its ledger row holds (0 without one).
func (d *db) stored(t *testing.T, name string) ([]string, uint64) {
	t.Helper()
	rows, err := d.sql.QueryContext(ctx(t), `SELECT TIMESTAMPDIFF(MINUTE, '2026-03-01 00:00:00', slot), owner, fence, attempt,
		status, ended IS NULL FROM dlock_leases_runs WHERE name = ? ORDER BY slot DESC`, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var recs []string
	for rows.Next() {
		var (
			m, attempt    int
			owner, status string
			fence         uint64
			open          bool
		)
		if err := rows.Scan(&m, &owner, &fence, &attempt, &status, &open); err != nil {
			t.Fatal(err)
		}
		if open {
			status = "-"
		}
		recs = append(recs, fmt.Sprintf("%d:%s:%d:%d:%s", m, owner, fence, attempt, status))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var highest uint64
	_ = d.sql.QueryRowContext(ctx(t), `SELECT fence FROM dlock_leases_ledgers WHERE name = ?`, name).Scan(&highest)
	return recs, highest
}

func (d *db) wantStored(t *testing.T, name string, recs []string, highest uint64) {
	t.Helper()
	got, h := d.stored(t, name)
	if !slices.Equal(got, recs) || h != highest {
		t.Fatalf("stored %q, highest fence %d; want %q, %d", got, h, recs, highest)
	}
}

// TestLedgerFencedInSQL: the ledger as the database holds it, read with
// SQL: a row per slot in <table>_runs and the highest fence a write
// carried in <table>_ledgers. A refused write changes no row; a claim
// that finds its slot taken raises the fence alone, so the record's own
// runner can no longer record an outcome; a claim deletes the rows of
// slots beyond the newest keep in its own transaction, and a slot older
// than those kept is recorded, and dropped by the next claim's trim.
func TestLedgerFencedInSQL(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cmp.Or(cfg.Mode, mysqllock.Lease)), func(t *testing.T) {
			g := ledgerOf(t, d.locker(t, cfg))
			c := ctx(t)
			name := "stored/" + string(cfg.Mode)
			claim := func(rec driver.RunRecord, keep int) error {
				_, _, err := g.ClaimRun(c, rec, false, keep)
				return err
			}
			if err := claim(run(name, 1, 10, "a"), 10); err != nil {
				t.Fatal(err)
			}
			stale := run(name, 1, 9, "stale")
			stale.Ended, stale.Status = time.Now(), "ok"
			claimErr, finishErr := claim(run(name, 2, 9, "stale"), 10), g.FinishRun(c, stale)
			if !errors.Is(claimErr, driver.ErrNotHeld) || !errors.Is(finishErr, driver.ErrNotHeld) {
				t.Fatalf("claim and outcome at fence 9 after 10 = %v, %v; want ErrNotHeld", claimErr, finishErr)
			}
			d.wantStored(t, name, []string{"1:a:10:1:-"}, 10)
			if err := claim(run(name, 1, 11, "b"), 10); err != nil {
				t.Fatal(err)
			}
			done := run(name, 1, 10, "a")
			done.Ended, done.Status = time.Now(), "ok"
			if err := g.FinishRun(c, done); !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("FinishRun at fence 10 after a claim of its taken slot at 11 = %v; want ErrNotHeld", err)
			}
			d.wantStored(t, name, []string{"1:a:10:1:-"}, 11)
			if err := errors.Join(claim(run(name, 3, 11, "h"), 10), claim(run(name, 2, 11, "h"), 2)); err != nil {
				t.Fatal(err)
			}
			d.wantStored(t, name, []string{"3:h:11:1:-", "2:h:11:1:-"}, 11)
			if err := claim(run(name, 0, 11, "old"), 2); err != nil {
				t.Fatal(err)
			}
			d.wantStored(t, name, []string{"3:h:11:1:-", "2:h:11:1:-", "0:old:11:1:-"}, 11)
			if err := claim(run(name, 4, 11, "h"), 2); err != nil {
				t.Fatal(err)
			}
			d.wantStored(t, name, []string{"4:h:11:1:-", "3:h:11:1:-"}, 11)
		})
	}
}

// TestLedgerClaimContended: in both modes the ledger's transaction alone
// decides between claims of one slot made at once by 8 callers that do
// not hold the lock, on connections of their own, for 30 slots.
func TestLedgerClaimContended(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cmp.Or(cfg.Mode, mysqllock.Lease)), func(t *testing.T) {
			dlocktest.ClaimContended(t, func(t testing.TB) *dlock.Locker { return d.locker(t, cfg) }, 30)
		})
	}
}

// TestLedgerClaimRetried: a claim sent again by the same grant (its reply
// was lost) finds its own record and gets it as claimed; another grant's
// claim of the slot does not.
func TestLedgerClaimRetried(t *testing.T) {
	d := newDB(t)
	g := ledgerOf(t, d.locker(t, mysqllock.Config{}))
	rec := run("retried", 1, 5, "a")
	rec.Started = rec.Started.Add(789 * time.Nanosecond) // below what DATETIME(6) keeps
	for i := range 2 {
		if _, ok, err := g.ClaimRun(ctx(t), rec, false, 10); !ok || err != nil {
			t.Fatalf("claim #%d of the same grant = %v, %v; want claimed", i+1, ok, err)
		}
	}
	other := rec
	other.Owner = "b"
	if got, ok, err := g.ClaimRun(ctx(t), other, false, 10); ok || err != nil || got.Owner != "a" {
		t.Errorf("claim by another owner under the same fence = %+v, %v, %v; want a's record, not claimed", got, ok, err)
	}
}

// TestLedgerBadRecord: what DATETIME(6) and the columns cannot hold is
// refused, naming the value, before anything runs or is written: a slot
// with a fraction of a microsecond (it would collide with its neighbour),
// a year before 1000, an owner too long.
func TestLedgerBadRecord(t *testing.T) {
	d := newDB(t)
	l := d.locker(t, mysqllock.Config{})
	for _, c := range []struct {
		slot dlock.Slot
		want string
	}{
		{dlock.Slot{Time: minute(1).Add(1500 * time.Nanosecond), Schedule: "every 1.5µs"}, "2026-03-01T00:01:00.0000015Z"},
		{dlock.Slot{Time: time.Date(999, 12, 31, 0, 0, 0, 0, time.UTC), Schedule: "every 1h"}, "0999-12-31T00:00:00Z"},
	} {
		_, err := l.RunOnce(ctx(t), "bad", c.slot, func(context.Context, *dlock.Lease) error {
			t.Error("the job ran")
			return nil
		})
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RunOnce with slot %s = %v; want ErrInvalidArgument naming it", c.want, err)
		}
	}
	long := run("bad", 1, 1, strings.Repeat("o", 1025))
	if _, _, err := ledgerOf(t, l).ClaimRun(ctx(t), long, false, 10); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "owner of 1025 bytes") {
		t.Errorf("ClaimRun with an owner of 1025 bytes = %v; want ErrInvalidArgument naming its length", err)
	}
	if _, _, err := ledgerOf(t, l).ClaimRun(ctx(t), run("bad", 1, 1, "a"), false, 0); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("ClaimRun keeping 0 runs = %v; want ErrInvalidArgument", err)
	}
	if runs, err := l.Runs(ctx(t), "bad"); err != nil || len(runs) != 0 {
		t.Errorf("Runs = %v, %v; want none", runs, err)
	}
}

// ledgerPaths are the run ledger's calls, for the missing-schema test.
func ledgerPaths(l *dlock.Locker) map[string]func(context.Context) error {
	g := l.Driver().(driver.Ledger)
	rec := run("unmigrated", 1, 1, "x")
	slot := dlock.Slot{Time: minute(1), Schedule: "every 1m0s"}
	return map[string]func(context.Context) error{
		"ClaimRun":  func(c context.Context) error { _, _, err := g.ClaimRun(c, rec, false, 10); return err },
		"FinishRun": func(c context.Context) error { return g.FinishRun(c, rec) },
		"Runs":      func(c context.Context) error { _, err := l.Runs(c, "unmigrated"); return err },
		"RunOnce": func(c context.Context) error {
			_, err := l.RunOnce(c, "earlier", slot, func(context.Context, *dlock.Lease) error { return nil })
			return err
		},
	}
}

// TestLedgerEarlierSchema: on a schema migrated by an earlier version (no
// run ledger tables), locks work, and RunOnce, ClaimRun, FinishRun and
// Runs fail at once with the *SchemaError that names the fix; `dlock
// migrate` then reports the two tables it created, and RunOnce works.
func TestLedgerEarlierSchema(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cmp.Or(cfg.Mode, mysqllock.Lease)), func(t *testing.T) {
			d.exec(t, "DROP TABLE dlock_leases_runs, dlock_leases_ledgers")
			mode := cmp.Or(cfg.Mode, mysqllock.Lease)
			l, err := dlock.Open(ctx(t), d.url+"?mode="+string(mode))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ls, err := l.TryAcquire(ctx(t), "earlier")
			if err != nil {
				t.Fatalf("TryAcquire on the earlier schema: %v", err)
			}
			if err := ls.Release(ctx(t)); err != nil {
				t.Fatal(err)
			}
			for name, call := range ledgerPaths(l) {
				err := call(ctx(t))
				var se *mysqllock.SchemaError
				if !errors.As(err, &se) || !errors.Is(err, driver.ErrPermanent) || !strings.Contains(err.Error(), "run 'dlock migrate --url mysql://") {
					t.Errorf("%s on the earlier schema = %v; want a permanent SchemaError naming 'dlock migrate --url'", name, err)
				}
			}
			created, err := l.Driver().(driver.MigrationReporter).MigrateReport(ctx(t))
			if want := []string{"table dlock_leases_runs", "table dlock_leases_ledgers"}; err != nil || !slices.Equal(created, want) {
				t.Fatalf("MigrateReport = %q, %v; want %q", created, err, want)
			}
			slot := dlock.Slot{Time: minute(1), Schedule: "every 1m0s"}
			if _, err := l.RunOnce(ctx(t), "earlier", slot, func(context.Context, *dlock.Lease) error { return nil }); err != nil {
				t.Fatalf("RunOnce after migrating: %v", err)
			}
		})
	}
}

// TestLedgerSurvivesCrash: the run ledger is durable (a server started
// with innodb_flush_log_at_trx_commit=1, which `dlock doctor` asks for):
// after a SIGKILL of the server and a restart, a finished run and a run
// without an outcome are there as they were, a taken slot is not run
// again, and the name's highest fence still refuses an older grant's
// write.
func TestLedgerSurvivesCrash(t *testing.T) {
	srv := testserver.NewMariaDB(t, "--innodb-flush-log-at-trx-commit=1")
	d := onServer(t, srv)
	before := map[mysqllock.Mode][]dlock.Run{}
	for _, cfg := range modes {
		before[cfg.Mode] = ledgerBeforeCrash(t, d, cfg)
	}
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range modes {
		t.Run(string(cmp.Or(cfg.Mode, mysqllock.Lease)), func(t *testing.T) {
			l := d.locker(t, cfg)
			name := "crash/" + string(cfg.Mode)
			runs, err := l.Runs(ctx(t), name)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRuns(runs, before[cfg.Mode]) {
				t.Fatalf("after the crash Runs = %v\nwant as before: %v", runs, before[cfg.Mode])
			}
			_, err = l.RunOnce(ctx(t), name, runs[1].Slot, func(context.Context, *dlock.Lease) error {
				t.Error("a slot that ran before the crash ran again")
				return nil
			})
			if !errors.Is(err, dlock.ErrSlotTaken) {
				t.Errorf("RunOnce of the finished slot after the crash = %v, want ErrSlotTaken", err)
			}
			stale := run(name, 9, runs[0].Fence-1, "stale")
			if _, ok, err := ledgerOf(t, l).ClaimRun(ctx(t), stale, false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("ClaimRun under an older fence after the crash = %v, %v; want ErrNotHeld", ok, err)
			}
		})
	}
}

// ledgerBeforeCrash writes a finished run (slot 1, by RunOnce) and one
// without an outcome (slot 2, claimed under a grant then released) and
// returns Runs.
func ledgerBeforeCrash(t *testing.T, d *db, cfg mysqllock.Config) []dlock.Run {
	t.Helper()
	l, err := cfg.Locker(d.sql)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	name := "crash/" + string(cfg.Mode)
	if _, err := l.RunOnce(ctx(t), name, dlock.Slot{Time: minute(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ledgerOf(t, l).ClaimRun(ctx(t), run(name, 2, ls.Fence(), "gone/1"), false, 10); !ok || err != nil {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	if err := ls.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	runs, err := l.Runs(ctx(t), name)
	if err != nil || len(runs) != 2 || runs[0].State != dlock.RunCrashed || runs[1].State != dlock.RunOK {
		t.Fatalf("Runs before the crash = %v, %v; want slot 2 crashed, slot 1 ok", runs, err)
	}
	return runs
}

// sameRuns compares runs field by field, times as instants.
func sameRuns(a, b []dlock.Run) bool {
	return slices.EqualFunc(a, b, func(x, y dlock.Run) bool {
		return x.Slot.Time.Equal(y.Slot.Time) && x.Slot.Schedule == y.Slot.Schedule && x.Owner == y.Owner &&
			x.Fence == y.Fence && x.Attempt == y.Attempt && x.Started.Truncate(time.Microsecond).Equal(y.Started.Truncate(time.Microsecond)) &&
			x.Ended.Truncate(time.Microsecond).Equal(y.Ended.Truncate(time.Microsecond)) && x.Status == y.Status && x.State == y.State
	})
}

// TestLedgerStatementBinlog: the ledger's transactions are REPEATABLE
// READ, which a server logging statements (binlog_format=STATEMENT)
// accepts; READ COMMITTED writes would be refused there (error 1665).
func TestLedgerStatementBinlog(t *testing.T) {
	srv := testserver.NewMariaDB(t, "--log-bin=binlog", "--binlog-format=STATEMENT", "--server-id=1")
	d := onServer(t, srv)
	l := d.locker(t, mysqllock.Config{})
	slot := dlock.Slot{Time: minute(1), Schedule: "every 1m0s"}
	if _, err := l.RunOnce(ctx(t), "statement", slot, func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatalf("RunOnce with binlog_format=STATEMENT: %v", err)
	}
	if _, err := l.RunOnce(ctx(t), "statement", slot, func(context.Context, *dlock.Lease) error { return nil }); !errors.Is(err, dlock.ErrSlotTaken) {
		t.Fatalf("second RunOnce = %v, want ErrSlotTaken", err)
	}
}
