package pglock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Diagnose (driver.Diagnoser) checks the deployment against the traps of
// locking on PostgreSQL: a pooling proxy in front (fatal to advisory
// mode, and to LISTEN in lease mode), synchronous_commit and fsync (a
// crash can lose the last grants, and a lost grant's fence is handed out
// again), asynchronous replicas (a failover can do the same), the mode's
// schema and the run ledger's tables. It only reads. A check it may not run is a warning.
func (d *advisory) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	return d.diagnose(ctx, []string{"{{seq}}", "{{holders}}"}, "")
}

// Diagnose (driver.Diagnoser): see the advisory mode's.
func (d *leases) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	return d.diagnose(ctx, []string{"{{seq}}", "{{table}}"}, "dead")
}

func (b *base) diagnose(ctx context.Context, objects []string, column string) ([]driver.Finding, error) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, b.classifyAdmin(err)
	}
	defer conn.Release()
	var fs []driver.Finding
	var pid, again uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return nil, b.classifyAdmin(err)
	}
	_ = conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&again)
	fs = append(fs, b.proxyFinding(conn.Conn().PgConn().PID(), pid, again))
	for _, s := range []struct{ name, bad, verdictBad, detail, fix string }{
		{"synchronous_commit", "off", "unsafe",
			"synchronous_commit=off: a crash can lose the last committed grants, and their fences are then handed out again",
			"set synchronous_commit=on (ALTER DATABASE ... SET synchronous_commit = on, or in postgresql.conf)"},
		{"fsync", "off", "unsafe",
			"fsync=off: an OS crash or power loss can lose committed grants and the fence sequence's state; fences can be reused",
			"set fsync=on in postgresql.conf"},
	} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", s.name).Scan(&v); err != nil {
			fs = append(fs, driver.Finding{Check: s.name, Verdict: driver.VerdictWarn, Detail: "cannot read: " + err.Error()})
			continue
		}
		f := driver.Finding{Check: "postgres " + s.name, Verdict: driver.VerdictOK, Detail: s.name + "=" + v}
		if v == s.bad {
			f.Verdict, f.Detail, f.Fix = driver.Verdict(s.verdictBad), s.detail, s.fix
		}
		fs = append(fs, f)
	}
	fs = append(fs, b.replicationFinding(ctx, conn))
	fs = append(fs, b.schemaFinding(ctx, conn, objects, column))
	fs = append(fs, b.ledgerFinding(ctx, conn))
	return fs, nil
}

func (b *base) proxyFinding(startupPID, pid, again uint32) driver.Finding {
	f := driver.Finding{Check: "postgres pooling proxy", Verdict: driver.VerdictOK, Detail: "direct connection to the server"}
	switch {
	case pid != again:
		f.Verdict = driver.VerdictUnsafe
		f.Detail = fmt.Sprintf("the server backend changed between two statements on one connection (%d, then %d): a transaction-pooling proxy", pid, again)
		f.Fix = "connect directly, or through session pooling (PgBouncer pool_mode=session)"
		if b.mode == Lease {
			f.Verdict = driver.VerdictWarn
			f.Detail += "; lease mode works through it, but LISTEN does not: waiters fall back to polling"
		}
	case pid != startupPID:
		f.Detail = "a proxy in front that keeps one server backend per connection (session pooling): fine"
	}
	return f
}

// replicationFinding warns of asynchronous standbys: a failover to one
// loses the grants it had not received, and their fences are reused.
func (b *base) replicationFinding(ctx context.Context, conn *pgxpool.Conn) driver.Finding {
	f := driver.Finding{Check: "postgres replication", Verdict: driver.VerdictOK}
	var async, total int
	var syncNames string
	err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE sync_state = 'async'), count(*),
		current_setting('synchronous_standby_names') FROM pg_stat_replication`).Scan(&async, &total, &syncNames)
	switch {
	case err != nil:
		f.Verdict, f.Detail = driver.VerdictWarn, "cannot read pg_stat_replication: "+err.Error()
	case total == 0:
		f.Detail = "no standby connected (a failover, if any is set up elsewhere, is not checked)"
	case async > 0:
		f.Verdict = driver.VerdictWarn
		f.Detail = fmt.Sprintf("%d of %d standbys are asynchronous (synchronous_standby_names=%q): a failover to one can lose recent grants and reuse their fences", async, total, syncNames)
		f.Fix = "list the standbys you would fail over to in synchronous_standby_names"
	default:
		f.Detail = fmt.Sprintf("%d synchronous standbys", total)
	}
	return f
}

// schemaFinding checks that the mode's objects exist and are current.
func (b *base) schemaFinding(ctx context.Context, conn *pgxpool.Conn, objects []string, column string) driver.Finding {
	f := driver.Finding{Check: "dlock schema (mode=" + string(b.mode) + ")", Verdict: driver.VerdictOK}
	missing, err := b.missing(ctx, conn, objects)
	if err != nil {
		f.Verdict, f.Detail = driver.VerdictWarn, "cannot check: "+err.Error()
		return f
	}
	if column != "" && len(missing) == 0 {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`,
			b.table, column).Scan(&ok)
		if err == nil && !ok {
			missing = append(missing, b.table+"."+column+" (an earlier version's table)")
		}
	}
	if len(missing) > 0 {
		f.Verdict = driver.VerdictUnsafe
		f.Detail = fmt.Sprintf("missing: %v; every acquire fails", missing)
		f.Fix = b.migrateFix()
		return f
	}
	f.Detail = "sequence and tables present"
	return f
}

// ledgerFinding checks that the run ledger's tables exist: without them
// locks work, but Locker.RunOnce and `dlock run --once-per` fail (a
// schema migrated by an earlier version).
func (b *base) ledgerFinding(ctx context.Context, conn *pgxpool.Conn) driver.Finding {
	f := driver.Finding{Check: "dlock run ledger (mode=" + string(b.mode) + ")", Verdict: driver.VerdictOK, Detail: "tables present"}
	missing, err := b.missing(ctx, conn, []string{"{{runs}}", "{{ledgers}}"})
	switch {
	case err != nil:
		f.Verdict, f.Detail = driver.VerdictWarn, "cannot check: "+err.Error()
	case len(missing) > 0:
		f.Verdict = driver.VerdictWarn
		f.Detail = fmt.Sprintf("missing: %v; locks work, but RunOnce and 'dlock run --once-per' fail", missing)
		f.Fix = b.migrateFix()
	}
	return f
}

// missing returns the objects (templates) that do not exist, by name.
func (b *base) missing(ctx context.Context, conn *pgxpool.Conn, objects []string) ([]string, error) {
	var missing []string
	for _, o := range objects {
		name := b.sql(o)
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// migrateFix is the command that creates the mode's schema.
func (b *base) migrateFix() string {
	u := b.url
	if u == "" {
		u = "…"
	}
	return fmt.Sprintf("run 'dlock migrate --url %s' or Locker.Migrate once (mode=%s)", u, b.mode)
}
