package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/driver"
)

var (
	_ driver.Diagnoser = (*leases)(nil)
	_ driver.Diagnoser = (*getLocks)(nil)
)

// Diagnose (driver.Diagnoser) checks the deployment against the traps of
// locking on MySQL and MariaDB: innodb_flush_log_at_trx_commit other than
// 1 (a crash can lose the last committed grants, and their fences are
// then handed out again), the binary log's sync_binlog and format (a
// replica promoted after a crash can miss grants, or hold rows other than
// the primary's), a server that is read-only or a replica (grants fail,
// or go to a server that is not the primary), a connection-pooling proxy
// in front (fatal to get_lock mode), and the schema with the run ledger's
// tables. It only reads. A check it may not run is a warning.
func (b *base) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, b.classifyAdmin(err)
	}
	defer conn.Close()
	var v serverVars
	if err := conn.QueryRowContext(ctx, serverVarsQuery).Scan(v.dest()...); err != nil {
		return nil, b.classifyAdmin(err)
	}
	fs := []driver.Finding{b.proxyFinding(ctx, conn, v.versionComment), flushFinding(v.flush)}
	fs = append(fs, binlogFindings(v)...)
	fs = append(fs, readOnlyFinding(v.readOnly), replicaFinding(ctx, conn))
	fs = append(fs, b.tablesFinding(ctx, conn, "dlock schema", schemaTables, driver.VerdictUnsafe, "every acquire fails"))
	fs = append(fs, b.tablesFinding(ctx, conn, "dlock run ledger", ledgerTables, driver.VerdictWarn,
		"locks work, but RunOnce and 'dlock run --once-per' fail"))
	return fs, nil
}

// serverVarsQuery reads the settings the checks need, global values
// (what new sessions get), on both MariaDB and MySQL 8.
const serverVarsQuery = `SELECT @@GLOBAL.innodb_flush_log_at_trx_commit, @@GLOBAL.log_bin, @@GLOBAL.sync_binlog,
	@@GLOBAL.binlog_format, @@GLOBAL.read_only, @@version_comment`

type serverVars struct {
	flush, logBin, syncBinlog, binlogFormat, readOnly, versionComment string
}

func (v *serverVars) dest() []any {
	return []any{&v.flush, &v.logBin, &v.syncBinlog, &v.binlogFormat, &v.readOnly, &v.versionComment}
}

// flushFinding: with 0 the log is written and flushed once a second, so
// a crash of the server loses the last second's commits; with 2 it is
// written at each commit but flushed once a second, so an OS crash or
// power loss does. Either way a lost grant's fence is drawn again.
func flushFinding(flush string) driver.Finding {
	f := driver.Finding{Check: "mysql innodb_flush_log_at_trx_commit", Verdict: driver.VerdictOK,
		Detail: "innodb_flush_log_at_trx_commit=" + flush + ": each commit is on disk before it is acknowledged"}
	lost := map[string]string{"0": "a crash of the server", "2": "an OS crash or power loss"}[flush]
	if flush != "1" {
		if lost == "" {
			lost = "a crash"
		}
		f.Verdict = driver.VerdictUnsafe
		f.Detail = fmt.Sprintf("innodb_flush_log_at_trx_commit=%s: %s can lose the last second of committed grants and run records; their fences are then handed out again", flush, lost)
		f.Fix = "SET GLOBAL innodb_flush_log_at_trx_commit = 1, and innodb_flush_log_at_trx_commit=1 in my.cnf"
	}
	return f
}

// binlogFindings check sync_binlog and binlog_format when the binary log
// is on: replicas, and a point-in-time restore, are fed from it.
func binlogFindings(v serverVars) []driver.Finding {
	if v.logBin != "1" {
		off := "the binary log is off (log_bin=0): no replica is fed from this server"
		return []driver.Finding{
			{Check: "mysql sync_binlog", Verdict: driver.VerdictOK, Detail: off},
			{Check: "mysql binlog_format", Verdict: driver.VerdictOK, Detail: off},
		}
	}
	sync := driver.Finding{Check: "mysql sync_binlog", Verdict: driver.VerdictOK, Detail: "sync_binlog=1: the binary log is flushed at each commit"}
	if v.syncBinlog != "1" {
		sync.Verdict = driver.VerdictWarn
		sync.Detail = fmt.Sprintf("sync_binlog=%s with the binary log on: after an OS crash the binary log can miss committed grants, so a replica promoted then lacks them and hands their fences out again", v.syncBinlog)
		sync.Fix = "SET GLOBAL sync_binlog = 1, and sync_binlog=1 in my.cnf"
	}
	format := driver.Finding{Check: "mysql binlog_format", Verdict: driver.VerdictOK, Detail: "binlog_format=" + v.binlogFormat}
	if strings.EqualFold(v.binlogFormat, "STATEMENT") {
		format.Verdict = driver.VerdictWarn
		format.Detail = "binlog_format=STATEMENT: replicas re-run the statements, and those that depend on the server's clock or on GET_LOCK are unsafe to re-run: a replica's lease and fence rows can differ from the primary's"
		format.Fix = "SET GLOBAL binlog_format = 'ROW' (or MIXED), and in my.cnf"
	}
	return []driver.Finding{sync, format}
}

// readOnlyFinding: a read-only server refuses grants, except to a user
// allowed to write anyway (SUPER, READ_ONLY ADMIN), whose grants then go
// to a server that is not the primary.
func readOnlyFinding(readOnly string) driver.Finding {
	f := driver.Finding{Check: "mysql read_only", Verdict: driver.VerdictOK, Detail: "read_only=0"}
	if readOnly != "0" {
		f.Verdict = driver.VerdictUnsafe
		f.Detail = "read_only=" + readOnly + ": every grant fails, or, for a user allowed to write anyway (SUPER, READ_ONLY ADMIN), is kept on a server that is not the primary"
		f.Fix = "point the URL at the primary (read_only=0)"
	}
	return f
}

// replicaFinding: a server with replication configured takes its rows
// from a primary; locks taken on it are not the primary's, and its
// replication thread can overwrite them.
func replicaFinding(ctx context.Context, conn *sql.Conn) driver.Finding {
	f := driver.Finding{Check: "mysql replica", Verdict: driver.VerdictOK, Detail: "no replication source configured"}
	source, err := replicationSource(ctx, conn)
	switch {
	case err != nil:
		f.Verdict, f.Detail = driver.VerdictWarn, "cannot read SHOW REPLICA STATUS (it needs the REPLICATION CLIENT privilege): "+err.Error()
	case source != "":
		f.Verdict = driver.VerdictUnsafe
		f.Detail = "this server is a replica of " + source + ": locks taken here are not the primary's, and replication can overwrite them"
		f.Fix = "point the URL at the primary"
	}
	return f
}

// replicationSource returns the host:port this server replicates from, or
// "" when it is no replica. MySQL 8.4 knows only SHOW REPLICA STATUS,
// MariaDB before 10.5 only SHOW SLAVE STATUS.
func replicationSource(ctx context.Context, conn *sql.Conn) (string, error) {
	rows, err := conn.QueryContext(ctx, "SHOW REPLICA STATUS")
	if err != nil {
		if rows, err = conn.QueryContext(ctx, "SHOW SLAVE STATUS"); err != nil {
			return "", err
		}
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil || !rows.Next() {
		return "", err
	}
	vals := make([]sql.RawBytes, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := rows.Scan(dest...); err != nil {
		return "", err
	}
	host, port := "?", "?"
	for i, c := range cols {
		switch c {
		case "Master_Host", "Source_Host":
			host = string(vals[i])
		case "Master_Port", "Source_Port":
			port = string(vals[i])
		}
	}
	return host + ":" + port, rows.Err()
}

// proxyFinding: behind a proxy that multiplexes client connections onto
// server connections (ProxySQL with multiplexing, some cloud proxies),
// the pinned connection that holds a GET_LOCK is not one server session:
// consecutive statements can run on different ones, so the lock is
// another session's, or gone. Seen as CONNECTION_ID() changing between
// two statements on one connection, or ProxySQL's version_comment.
func (b *base) proxyFinding(ctx context.Context, conn *sql.Conn, versionComment string) driver.Finding {
	f := driver.Finding{Check: "mysql pooling proxy", Verdict: driver.VerdictOK, Detail: "one server session per connection"}
	var first, again uint64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&first); err != nil {
		f.Verdict, f.Detail = driver.VerdictWarn, "cannot read CONNECTION_ID(): "+err.Error()
		return f
	}
	_ = conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&again)
	switch {
	case first != again:
		f.Detail = fmt.Sprintf("the server session changed between two statements on one connection (CONNECTION_ID() %d, then %d): a multiplexing proxy", first, again)
	case strings.Contains(strings.ToLower(versionComment), "proxysql"):
		f.Detail = fmt.Sprintf("version_comment %q: ProxySQL is in front, which multiplexes connections unless told not to", versionComment)
	default:
		return f
	}
	f.Verdict = driver.VerdictUnsafe
	f.Fix = "connect to the server directly, or disable multiplexing for this user (ProxySQL: mysql_query_rules multiplex=0, or use lease mode)"
	if b.mode == Lease {
		f.Verdict = driver.VerdictWarn
		f.Detail += "; lease mode needs no pinned connection and works through it, get_lock mode does not"
		f.Fix = "keep lease mode behind this proxy; for get_lock mode connect directly"
	}
	return f
}

// tablesFinding checks that the tables named after the lease table with
// suffixes exist; without one, the verdict is missingVerdict and the
// detail says what breaks.
func (b *base) tablesFinding(ctx context.Context, conn *sql.Conn, check string, suffixes []string,
	missingVerdict driver.Verdict, breaks string) driver.Finding {
	f := driver.Finding{Check: check + " (mode=" + string(b.mode) + ")", Verdict: driver.VerdictOK, Detail: "tables present"}
	var missing []string
	for _, s := range suffixes {
		ok, err := tableExists(ctx, conn, b.table+s)
		if err != nil {
			f.Verdict, f.Detail = driver.VerdictWarn, "cannot check: "+err.Error()
			return f
		}
		if !ok {
			missing = append(missing, b.table+s)
		}
	}
	if len(missing) > 0 {
		f.Verdict = missingVerdict
		f.Detail = fmt.Sprintf("missing: %v; %s", missing, breaks)
		f.Fix = b.migrateFix()
	}
	return f
}

// migrateFix is the command that creates the schema.
func (b *base) migrateFix() string {
	u := b.url
	if u == "" {
		u = "…"
	}
	return fmt.Sprintf("run 'dlock migrate --url %s' or Locker.Migrate once (mode=%s)", u, b.mode)
}
