package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
)

// schemaDDL creates the fence counter and the lease table (both modes)
// and get_lock mode's holders table. The counter is one row: get_lock mode
// bumps it with every grant, with UPDATE … LAST_INSERT_ID(v + 1); lease
// mode keeps each name's fence in its row and uses the counter as the
// floor that new rows start from, raised before old rows are deleted. It
// works alike on MariaDB and MySQL 8 (which has no SEQUENCE), it is
// transactional and durable with the grant that writes it, and it never
// goes backwards across a restart (an AUTO_INCREMENT counter could, on
// MySQL 5.7). Names are VARBINARY: compared byte for byte, as dlock names
// are.
var schemaDDL = []string{
	`CREATE TABLE IF NOT EXISTS {{fences}} (
	id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
	v  BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB`,
	`INSERT INTO {{fences}} (id, v) VALUES (1, 0) ON DUPLICATE KEY UPDATE v = v`,
	`CREATE TABLE IF NOT EXISTS {{table}} (
	name       VARBINARY(512) NOT NULL PRIMARY KEY,
	token      VARBINARY(64) NULL,
	owner      VARBINARY(1024) NOT NULL DEFAULT '',
	fence      BIGINT UNSIGNED NOT NULL DEFAULT 0,
	expires_at DATETIME(6) NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS {{holders}} (
	conn_id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
	name    VARBINARY(512) NOT NULL,
	token   VARBINARY(64) NOT NULL,
	owner   VARBINARY(1024) NOT NULL DEFAULT '',
	fence   BIGINT UNSIGNED NOT NULL,
	KEY (name)
) ENGINE=InnoDB`,
}

// schemaTables are the tables schemaDDL creates, by suffix, in its order.
var schemaTables = []string{fencesSuffix, "", holdersSuffix}

// allDDL and allTables are the schema with the run ledger's tables
// (ledger_sql.go), which Migrate creates too.
var (
	allDDL    = append(append([]string{}, schemaDDL...), ledgerDDL...)
	allTables = append(append([]string{}, schemaTables...), ledgerTables...)
)

// migrateLock is the GET_LOCK name that serialises concurrent migrations.
const migrateLock = "dlock migrate"

// Migrate creates the fence counter, the lease and holders tables and
// the run ledger's tables (both modes share one schema); it is
// idempotent.
func (b *base) Migrate(ctx context.Context) error {
	_, err := b.MigrateReport(ctx)
	return err
}

// MigrateReport (driver.MigrationReporter) is Migrate, returning the
// tables it created; none when the schema was up to date.
func (b *base) MigrateReport(ctx context.Context) ([]string, error) {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, b.classifyAdmin(err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", migrateLock).Scan(&got); err != nil {
		return nil, b.classifyAdmin(err)
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("mysqllock: another migration held %q for 60 s", migrateLock)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", migrateLock) }()
	created, err := b.runDDL(ctx, conn)
	return created, b.classifyAdmin(err)
}

func (b *base) runDDL(ctx context.Context, conn *sql.Conn) ([]string, error) {
	before := make([]bool, len(allTables))
	for i, s := range allTables {
		var err error
		if before[i], err = tableExists(ctx, conn, b.table+s); err != nil {
			return nil, err
		}
	}
	for _, s := range allDDL {
		if _, err := conn.ExecContext(ctx, b.sql(s)); err != nil {
			return nil, err
		}
	}
	var created []string
	for i, s := range allTables {
		if !before[i] {
			created = append(created, "table "+b.table+s)
		}
	}
	made, err := b.createSequence(ctx, conn)
	if made {
		created = append(created, "sequence "+b.table+seqSuffix)
	}
	return created, err
}

// createSequence creates, on MariaDB, the sequence get_lock mode draws
// its fences from, unless it exists. It starts above the counter (which
// drew get_lock mode's fences before the sequence existed), so fences go
// on rising for every name; every client of a database must then draw
// from the sequence (a version of dlock that draws from the counter must
// not run beside one that draws from the sequence). A cached sequence
// hands out its next values from memory and writes only every 1,000th
// draw: a get_lock grant and its fence are then one statement, about as
// cheap as GET_LOCK alone, where a counter row's UPDATE doubled the
// server's work. After a crash the sequence goes on above its last
// cached block, never reusing a value. MySQL 8 has no sequences: there
// get_lock mode draws from the counter.
func (b *base) createSequence(ctx context.Context, conn *sql.Conn) (bool, error) {
	var flavor atomic.Int32
	maria, err := isMariaDB(ctx, conn, &flavor)
	if err != nil || !maria {
		return false, err
	}
	exists, err := tableExists(ctx, conn, b.table+seqSuffix)
	if err != nil || exists {
		return false, err
	}
	var v uint64
	if err := conn.QueryRowContext(ctx, b.sql(`SELECT v FROM {{fences}} WHERE id = 1`)).Scan(&v); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, b.sql(fmt.Sprintf(createSeq, v+1))); err != nil {
		return false, err
	}
	// MariaDB writes a new sequence's row without flushing InnoDB's log:
	// a crash before the next flush left the sequence without its row
	// ("Can't find record in 'dlock_leases_seq'", every grant refused,
	// in the fault suite's S6 with innodb_flush_log_at_trx_commit=0). A
	// commit that changes a row flushes the log up to it, the sequence's
	// row included; raising the counter by one is harmless (it only
	// rises).
	_, err = conn.ExecContext(ctx, b.sql(`UPDATE {{fences}} SET v = v + 1 WHERE id = 1`))
	return err == nil, err
}

// createSeq is the fence sequence's DDL, with its first value.
const createSeq = `CREATE SEQUENCE IF NOT EXISTS {{seq}} START WITH %d MINVALUE 1 MAXVALUE 9223372036854775806 CACHE 1000 NOCYCLE`

func tableExists(ctx context.Context, conn *sql.Conn, name string) (bool, error) {
	var n int
	err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = ?`, name).Scan(&n)
	return n > 0, err
}
