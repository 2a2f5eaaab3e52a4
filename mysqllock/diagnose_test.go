package mysqllock_test

import (
	"cmp"
	"fmt"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
)

// diagnose runs cfg's Diagnose on d and returns the findings by check,
// logging them.
func diagnose(t *testing.T, d *db, cfg mysqllock.Config) map[string]driver.Finding {
	t.Helper()
	fs, err := d.locker(t, cfg).Driver().(driver.Diagnoser).Diagnose(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]driver.Finding{}
	for _, f := range fs {
		got[f.Check] = f
		t.Logf("%-7s %s: %s; %s", f.Verdict, f.Check, f.Detail, f.Fix)
	}
	return got
}

// want checks the verdicts of the named checks, and that every finding
// that is not ok names its value and a fix.
func want(t *testing.T, got map[string]driver.Finding, verdicts map[string]driver.Verdict, values map[string]string) {
	t.Helper()
	for c, v := range verdicts {
		f := got[c]
		if f.Verdict != v {
			t.Errorf("%s: %q (%s), want %q", c, f.Verdict, f.Detail, v)
		}
		if v != driver.VerdictOK && (f.Fix == "" || !strings.Contains(f.Detail, values[c])) {
			t.Errorf("%s: detail %q, fix %q; want the value %q and a fix", c, f.Detail, f.Fix, values[c])
		}
	}
}

// TestDiagnoseBadSettings: a server started with
// innodb_flush_log_at_trx_commit=0, the binary log on with sync_binlog=0
// and binlog_format=STATEMENT is unsafe and warned of, naming each value;
// with the settings fixed (SET GLOBAL) they are ok; read_only on, and
// then a replication source configured, are unsafe. In both modes.
func TestDiagnoseBadSettings(t *testing.T) {
	srv := testserver.NewMariaDB(t, "--innodb-flush-log-at-trx-commit=0", "--log-bin=binlog", "--sync-binlog=0",
		"--binlog-format=STATEMENT", "--server-id=1")
	d := onServer(t, srv)
	for _, cfg := range modes {
		t.Run(string(cmp.Or(cfg.Mode, mysqllock.Lease)), func(t *testing.T) {
			want(t, diagnose(t, d, cfg), map[string]driver.Verdict{
				"mysql innodb_flush_log_at_trx_commit": driver.VerdictUnsafe,
				"mysql sync_binlog":                    driver.VerdictWarn,
				"mysql binlog_format":                  driver.VerdictWarn,
				"mysql read_only":                      driver.VerdictOK,
				"mysql replica":                        driver.VerdictOK,
				"mysql pooling proxy":                  driver.VerdictOK,
			}, map[string]string{
				"mysql innodb_flush_log_at_trx_commit": "innodb_flush_log_at_trx_commit=0",
				"mysql sync_binlog":                    "sync_binlog=0",
				"mysql binlog_format":                  "binlog_format=STATEMENT",
			})
		})
	}
	for _, q := range []string{"SET GLOBAL innodb_flush_log_at_trx_commit = 1", "SET GLOBAL sync_binlog = 1", "SET GLOBAL binlog_format = 'ROW'"} {
		d.exec(t, q)
	}
	fixed := map[string]driver.Verdict{
		"mysql innodb_flush_log_at_trx_commit": driver.VerdictOK,
		"mysql sync_binlog":                    driver.VerdictOK,
		"mysql binlog_format":                  driver.VerdictOK,
		"mysql read_only":                      driver.VerdictOK,
		"mysql replica":                        driver.VerdictOK,
	}
	want(t, diagnose(t, d, mysqllock.Config{}), fixed, nil)
	d.exec(t, "SET GLOBAL read_only = 1")
	t.Cleanup(func() { _ = srv.Exec("SET GLOBAL read_only = 0") })
	fixed["mysql read_only"] = driver.VerdictUnsafe
	want(t, diagnose(t, d, mysqllock.Config{}), fixed, map[string]string{"mysql read_only": "read_only=1"})
	port := testserver.FreePort(t) // nothing listens there: the source is configured, not reached
	d.exec(t, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %d, MASTER_USER = 'repl'", port))
	t.Cleanup(func() { _ = srv.Exec("RESET SLAVE ALL") })
	fixed["mysql replica"] = driver.VerdictUnsafe
	want(t, diagnose(t, d, mysqllock.Config{Mode: mysqllock.GetLock}), fixed,
		map[string]string{"mysql read_only": "read_only=1", "mysql replica": fmt.Sprintf("127.0.0.1:%d", port)})
}

// TestDiagnoseSchema: the schema and the run ledger missing before
// Migrate (unsafe, and a warning: locks work without the ledger), present
// after, the run ledger alone missing (a schema migrated by an earlier
// version); the test server's innodb_flush_log_at_trx_commit=2 is unsafe
// too, and its binary log is off.
func TestDiagnoseSchema(t *testing.T) {
	srv := testserver.MariaDB(t)
	name := srv.NewDatabase(t)
	d := &db{srv: srv, name: name, url: srv.URL(name), sql: openSQL(t, srv.DSN(name))}
	for _, cfg := range modes {
		t.Run(string(cmp.Or(cfg.Mode, mysqllock.Lease)), func(t *testing.T) {
			mode := string(cmp.Or(cfg.Mode, mysqllock.Lease))
			schema, ledger := "dlock schema (mode="+mode+")", "dlock run ledger (mode="+mode+")"
			verdicts := map[string]driver.Verdict{
				schema: driver.VerdictUnsafe, ledger: driver.VerdictWarn,
				"mysql innodb_flush_log_at_trx_commit": driver.VerdictUnsafe,
				"mysql sync_binlog":                    driver.VerdictOK,
			}
			values := map[string]string{schema: "dlock_leases_fences", ledger: "dlock_leases_runs",
				"mysql innodb_flush_log_at_trx_commit": "=2: an OS crash or power loss"}
			want(t, diagnose(t, d, cfg), verdicts, values)
			migrate(t, d.sql, cfg)
			verdicts[schema], verdicts[ledger] = driver.VerdictOK, driver.VerdictOK
			want(t, diagnose(t, d, cfg), verdicts, values)
			d.exec(t, "DROP TABLE dlock_leases_runs")
			verdicts[ledger] = driver.VerdictWarn
			want(t, diagnose(t, d, cfg), verdicts, values)
			d.exec(t, "DROP TABLE dlock_leases_fences, dlock_leases, dlock_leases_holders, dlock_leases_ledgers")
		})
	}
}
