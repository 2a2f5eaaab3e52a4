package pglock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
)

// TestDiagnose checks the findings that the test server makes visible:
// fsync off (it runs so), synchronous_commit off once set, the schema
// and the run ledger missing before Migrate and present after, the run
// ledger alone missing (a schema migrated by an earlier version), a
// direct connection.
func TestDiagnose(t *testing.T) {
	url := testserver.Postgres(t).NewDatabase(t)
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	exec(t, url, "ALTER DATABASE "+db+" SET synchronous_commit = off")
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			pool := newPool(t, url)
			drv, err := cfg.Driver(pool)
			if err != nil {
				t.Fatal(err)
			}
			defer drv.Close()
			want := map[string]driver.Verdict{
				"postgres pooling proxy":                           driver.VerdictOK,
				"postgres synchronous_commit":                      driver.VerdictUnsafe,
				"postgres fsync":                                   driver.VerdictUnsafe,
				"dlock schema (mode=" + string(cfg.Mode) + ")":     driver.VerdictUnsafe,
				"dlock run ledger (mode=" + string(cfg.Mode) + ")": driver.VerdictWarn,
			}
			check(t, drv, want)
			migrate(t, pool, cfg)
			want["dlock schema (mode="+string(cfg.Mode)+")"] = driver.VerdictOK
			want["dlock run ledger (mode="+string(cfg.Mode)+")"] = driver.VerdictOK
			check(t, drv, want)
			dropLedger(t, pool, cfg)
			want["dlock run ledger (mode="+string(cfg.Mode)+")"] = driver.VerdictWarn
			check(t, drv, want)
		})
	}
}

func check(t *testing.T, drv driver.Driver, want map[string]driver.Verdict) {
	t.Helper()
	fs, err := drv.(driver.Diagnoser).Diagnose(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]driver.Verdict{}
	for _, f := range fs {
		got[f.Check] = f.Verdict
		t.Logf("%-7s %s: %s; %s", f.Verdict, f.Check, f.Detail, f.Fix)
	}
	for c, v := range want {
		if got[c] != v {
			t.Errorf("%s: %q, want %q", c, got[c], v)
		}
	}
}

// TestReleaseBatch releases held, foreign and unknown leases in one call,
// in both modes.
func TestReleaseBatch(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			drv := d.locker(t, cfg).Driver()
			for _, n := range []string{"a", "b"} {
				g, err := drv.TryAcquire(ctx(t), driver.Request{Name: n, Token: "tok-" + n, TTL: time.Minute})
				if err != nil || !g.Acquired {
					t.Fatalf("acquire %s: %+v, %v", n, g, err)
				}
			}
			items := []driver.ReleaseItem{{Name: "a", Token: "tok-a"}, {Name: "b", Token: "wrong"}, {Name: "b", Token: "tok-b"}, {Name: "c", Token: "tok-c"}}
			res, err := drv.(driver.BatchReleaser).ReleaseBatch(ctx(t), items)
			if err != nil {
				t.Fatal(err)
			}
			for i, wantErr := range []bool{false, true, false, true} {
				if (res[i] != nil) != wantErr {
					t.Errorf("%+v: %v, want error %v", items[i], res[i], wantErr)
				}
			}
			for _, n := range []string{"a", "b"} {
				g, err := drv.TryAcquire(ctx(t), driver.Request{Name: n, Token: "again-" + n, TTL: time.Minute})
				if err != nil || !g.Acquired {
					t.Errorf("%s after the batch release: %+v, %v; want free", n, g, err)
				}
				_ = drv.Release(ctx(t), n, "again-"+n)
			}
		})
	}
	_ = pglock.Lease
}
