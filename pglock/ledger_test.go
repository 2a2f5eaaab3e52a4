package pglock_test

import (
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
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// prefix is the name the mode's objects are named after.
func prefix(cfg pglock.Config) string {
	if cfg.Mode == pglock.Advisory {
		return pglock.DefaultFenceTable
	}
	return pglock.DefaultLeaseTable
}

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
// fence:attempt:status" ("-" for no outcome), newest slot first, and
// the highest fence its ledger row holds (0 without one).
func stored(t *testing.T, pool *pgxpool.Pool, cfg pglock.Config, name string) ([]string, int64) {
	t.Helper()
	rows, err := pool.Query(ctx(t), fmt.Sprintf(`SELECT slot, owner, fence, attempt, coalesce(status, ''), ended IS NULL
		FROM %s_runs WHERE name = $1 ORDER BY slot DESC`, prefix(cfg)), name)
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	for rows.Next() {
		var (
			slot           time.Time
			owner, status  string
			fence, attempt int64
			open           bool
		)
		if err := rows.Scan(&slot, &owner, &fence, &attempt, &status, &open); err != nil {
			t.Fatal(err)
		}
		if open {
			status = "-"
		}
		recs = append(recs, fmt.Sprintf("%d:%s:%d:%d:%s", int(slot.Sub(minute(0))/time.Minute), owner, fence, attempt, status))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var highest int64
	_ = pool.QueryRow(ctx(t), fmt.Sprintf(`SELECT fence FROM %s_ledgers WHERE name = $1`, prefix(cfg)), name).Scan(&highest)
	return recs, highest
}

func wantStored(t *testing.T, pool *pgxpool.Pool, cfg pglock.Config, name string, recs []string, highest int64) {
	t.Helper()
	got, h := stored(t, pool, cfg, name)
	if !slices.Equal(got, recs) || h != highest {
		t.Fatalf("stored %q, highest fence %d; want %q, %d", got, h, recs, highest)
	}
}

// TestLedgerFencedInSQL: the ledger as the database holds it, read with SQL:
// a row per slot in <table>_runs and the highest fence a write carried in
// <table>_ledgers. A refused write changes no row; a claim that finds its
// slot taken raises the fence alone, so the record's own runner can no
// longer record an outcome; a claim deletes the rows of slots beyond the
// newest keep in its own statement, and a slot older than those kept is
// recorded, and dropped by the next claim's trim.
func TestLedgerFencedInSQL(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
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
			wantStored(t, d.admin, cfg, name, []string{"1:a:10:1:-"}, 10)
			if err := claim(run(name, 1, 11, "b"), 10); err != nil {
				t.Fatal(err)
			}
			done := run(name, 1, 10, "a")
			done.Ended, done.Status = time.Now(), "ok"
			if err := g.FinishRun(c, done); !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("FinishRun at fence 10 after a claim of its taken slot at 11 = %v; want ErrNotHeld", err)
			}
			wantStored(t, d.admin, cfg, name, []string{"1:a:10:1:-"}, 11)
			if err := errors.Join(claim(run(name, 3, 11, "h"), 10), claim(run(name, 2, 11, "h"), 2)); err != nil {
				t.Fatal(err)
			}
			wantStored(t, d.admin, cfg, name, []string{"3:h:11:1:-", "2:h:11:1:-"}, 11)
			if err := claim(run(name, 0, 11, "old"), 2); err != nil {
				t.Fatal(err)
			}
			wantStored(t, d.admin, cfg, name, []string{"3:h:11:1:-", "2:h:11:1:-", "0:old:11:1:-"}, 11)
			if err := claim(run(name, 4, 11, "h"), 2); err != nil {
				t.Fatal(err)
			}
			wantStored(t, d.admin, cfg, name, []string{"4:h:11:1:-", "3:h:11:1:-"}, 11)
		})
	}
}

// TestLedgerClaimContended: in both modes the claim statement alone
// decides between claims of one slot made at once by 8 callers that do
// not hold the lock, on connections of their own, for 30 slots.
func TestLedgerClaimContended(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			dlocktest.ClaimContended(t, func(t testing.TB) *dlock.Locker { return d.locker(t, cfg) }, 30)
		})
	}
}

// TestLedgerSlotMicroseconds: PostgreSQL keeps times to the microsecond,
// so a slot with a fraction of one is refused, naming it, before anything
// runs, instead of colliding with its neighbour.
func TestLedgerSlotMicroseconds(t *testing.T) {
	d := newDB(t)
	l := d.locker(t, pglock.Config{})
	slot := dlock.Slot{Time: minute(1).Add(1500 * time.Nanosecond), Schedule: "every 1.5µs"}
	_, err := l.RunOnce(ctx(t), "micro", slot, func(context.Context, *dlock.Lease) error {
		t.Error("the job ran")
		return nil
	})
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "2026-03-01T00:01:00.0000015Z") {
		t.Errorf("RunOnce with a slot of 1.5 µs = %v; want ErrInvalidArgument naming the slot", err)
	}
	runs, err := l.Runs(ctx(t), "micro")
	if err != nil || len(runs) != 0 {
		t.Errorf("Runs = %v, %v; want none", runs, err)
	}
}

// ledgerPaths are the run ledger's calls, for the missing-schema tests.
func ledgerPaths(l *dlock.Locker) []callPath {
	g := l.Driver().(driver.Ledger)
	rec := run("unmigrated", 1, 1, "x")
	return []callPath{
		{"ClaimRun", func(c context.Context) error { _, _, err := g.ClaimRun(c, rec, false, 10); return err }},
		{"FinishRun", func(c context.Context) error { return g.FinishRun(c, rec) }},
		{"Runs", func(c context.Context) error { _, err := l.Runs(c, "unmigrated"); return err }},
	}
}

// dropLedger drops the run ledger's tables of cfg's mode: the schema as
// an earlier version migrated it.
func dropLedger(t *testing.T, pool *pgxpool.Pool, cfg pglock.Config) {
	t.Helper()
	p := prefix(cfg)
	if _, err := pool.Exec(ctx(t), fmt.Sprintf("DROP TABLE %s_runs, %s_ledgers", p, p)); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerEarlierSchema: on a schema migrated by an earlier version
// (no run ledger tables), locks work, and RunOnce, ClaimRun, FinishRun
// and Runs fail with the *SchemaError that names the fix; `dlock
// migrate` then reports the two tables it created, and RunOnce works.
func TestLedgerEarlierSchema(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			dropLedger(t, d.admin, cfg)
			l, err := dlock.Open(ctx(t), d.url+"&mode="+string(cfg.Mode))
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
			slot := dlock.Slot{Time: minute(1), Schedule: "every 1m0s"}
			paths := append(ledgerPaths(l), callPath{"RunOnce", func(c context.Context) error {
				_, err := l.RunOnce(c, "earlier", slot, func(context.Context, *dlock.Lease) error { return nil })
				return err
			}})
			for _, p := range paths {
				err := p.call(ctx(t))
				var se *pglock.SchemaError
				if !errors.As(err, &se) || !errors.Is(err, driver.ErrPermanent) ||
					!strings.Contains(err.Error(), "run 'dlock migrate --url postgres://") || !strings.Contains(err.Error(), "mode="+string(cfg.Mode)) {
					t.Errorf("%s on the earlier schema = %v; want a permanent SchemaError naming 'dlock migrate --url' and mode=%s", p.name, err, cfg.Mode)
				}
			}
			created, err := l.Driver().(driver.MigrationReporter).MigrateReport(ctx(t))
			p := prefix(cfg)
			if want := []string{"table " + p + "_runs", "table " + p + "_ledgers"}; err != nil || !slices.Equal(created, want) {
				t.Fatalf("MigrateReport = %q, %v; want %q", created, err, want)
			}
			if _, err := l.RunOnce(ctx(t), "earlier", slot, func(context.Context, *dlock.Lease) error { return nil }); err != nil {
				t.Fatalf("RunOnce after migrating: %v", err)
			}
		})
	}
}

// TestLedgerSurvivesCrash: the run ledger is durable (synchronous_commit
// on, the default): after a SIGKILL of the postmaster and every backend
// and a restart, a finished run and a run without an outcome are there as
// they were, a taken slot is not run again, and the name's highest fence
// still refuses an older grant's write.
func TestLedgerSurvivesCrash(t *testing.T) {
	srv := testserver.NewPostgres(t)
	admin := newPool(t, srv.URL())
	var sc string
	if err := admin.QueryRow(ctx(t), "SHOW synchronous_commit").Scan(&sc); err != nil || sc != "on" {
		t.Fatalf("synchronous_commit = %q, %v; the test needs it on", sc, err)
	}
	for _, cfg := range modes {
		migrate(t, admin, cfg)
	}
	admin.Close()
	before := map[pglock.Mode][]dlock.Run{}
	for _, cfg := range modes {
		before[cfg.Mode] = ledgerBeforeCrash(t, srv.URL(), cfg)
	}
	srv.Kill()
	srv.Restart(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			pool := newPool(t, srv.URL())
			l, err := cfg.Locker(pool)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			runs, err := l.Runs(ctx(t), "crash")
			if err != nil {
				t.Fatal(err)
			}
			if !sameRuns(runs, before[cfg.Mode]) {
				t.Fatalf("after the crash Runs = %v\nwant as before: %v", runs, before[cfg.Mode])
			}
			_, err = l.RunOnce(ctx(t), "crash", runs[1].Slot, func(context.Context, *dlock.Lease) error {
				t.Error("a slot that ran before the crash ran again")
				return nil
			})
			if !errors.Is(err, dlock.ErrSlotTaken) {
				t.Errorf("RunOnce of the finished slot after the crash = %v, want ErrSlotTaken", err)
			}
			stale := run("crash", 9, runs[0].Fence-1, "stale")
			if _, ok, err := ledgerOf(t, l).ClaimRun(ctx(t), stale, false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
				t.Errorf("ClaimRun under an older fence after the crash = %v, %v; want ErrNotHeld", ok, err)
			}
		})
	}
}

// ledgerBeforeCrash writes a finished run (slot 1, by RunOnce) and one
// without an outcome (slot 2, claimed under a grant then released) and
// returns Runs.
func ledgerBeforeCrash(t *testing.T, url string, cfg pglock.Config) []dlock.Run {
	t.Helper()
	pool := newPool(t, url)
	defer pool.Close()
	l, err := cfg.Locker(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.RunOnce(ctx(t), "crash", dlock.Slot{Time: minute(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(ctx(t), "crash")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ledgerOf(t, l).ClaimRun(ctx(t), run("crash", 2, ls.Fence(), "gone/1"), false, 10); !ok || err != nil {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	if err := ls.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	runs, err := l.Runs(ctx(t), "crash")
	if err != nil || len(runs) != 2 || runs[0].State != dlock.RunCrashed || runs[1].State != dlock.RunOK {
		t.Fatalf("Runs before the crash = %v, %v; want slot 2 crashed, slot 1 ok", runs, err)
	}
	return runs
}

// sameRuns compares runs field by field, times as instants.
func sameRuns(a, b []dlock.Run) bool {
	return slices.EqualFunc(a, b, func(x, y dlock.Run) bool {
		return x.Slot.Time.Equal(y.Slot.Time) && x.Slot.Schedule == y.Slot.Schedule && x.Owner == y.Owner &&
			x.Fence == y.Fence && x.Attempt == y.Attempt && x.Started.Equal(y.Started) && x.Ended.Equal(y.Ended) &&
			x.Status == y.Status && x.State == y.State
	})
}
