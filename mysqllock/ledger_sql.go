package mysqllock

// Run-ledger statements, the same in both modes. {{runs}} is the table of
// recorded runs, {{ledgers}} the table of each name's highest fence.
//
// Two tables, because the fence that guards a name's ledger must outlive
// its records: the trim drops old slots, but a write under an older
// grant must still be refused afterwards.
//
// Times (slot, started, ended) are DATETIME(6) in UTC, written as text
// and read back as microseconds since the epoch (microsColumn), so that
// neither the DSN's parseTime and loc nor the session's time_zone can
// shift them; a reader can still query them as times.

// Suffixes of the run ledger's tables, named after the lease table.
const (
	runsSuffix    = "_runs"    // the run ledger's records
	ledgersSuffix = "_ledgers" // each name's run ledger: its highest fence
)

// ledgerDDL creates the run ledger's tables; Migrate runs it after
// schemaDDL. ended is NULL while a run has no outcome. Schedules and
// owners are VARBINARY(1024) (checkRun bounds them), statuses BLOB.
var ledgerDDL = []string{
	`CREATE TABLE IF NOT EXISTS {{runs}} (
	name     VARBINARY(512) NOT NULL,
	slot     DATETIME(6) NOT NULL,
	schedule VARBINARY(1024) NOT NULL,
	owner    VARBINARY(1024) NOT NULL,
	fence    BIGINT UNSIGNED NOT NULL,
	attempt  INT NOT NULL,
	started  DATETIME(6) NOT NULL,
	ended    DATETIME(6) NULL,
	status   BLOB NOT NULL,
	PRIMARY KEY (name, slot)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS {{ledgers}} (
	name  VARBINARY(512) NOT NULL PRIMARY KEY,
	fence BIGINT UNSIGNED NOT NULL
) ENGINE=InnoDB`,
}

// ledgerTables are the tables ledgerDDL creates, by suffix, in its order.
var ledgerTables = []string{runsSuffix, ledgersSuffix}

// ledgerEnsure creates name's ledger row, at fence 0, when it has none;
// committed on its own, so that the write's SELECT … FOR UPDATE always
// finds a row to lock (locking a missing row takes a gap lock, on which
// two first writes of neighbouring names can deadlock).
const ledgerEnsure = `INSERT INTO {{ledgers}} (name, fence) VALUES (?, 0) ON DUPLICATE KEY UPDATE name = name`

// ledgerLock reads name's highest fence under its row lock: the first
// step of every write, which orders the writes to one name's ledger.
const ledgerLock = `SELECT fence FROM {{ledgers}} WHERE name = ? FOR UPDATE`

// ledgerRaise raises name's highest fence to the write's.
const ledgerRaise = `UPDATE {{ledgers}} SET fence = ? WHERE name = ? AND fence < ?`

// microsColumn reads a DATETIME(6) column as microseconds since the
// epoch, UTC.
func microsColumn(col string) string {
	return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + col + ")"
}

// runColumns are a record's columns after its name, in the order
// storedRun.dest reads them.
var runColumns = microsColumn("slot") + ", schedule, owner, fence, attempt, " +
	microsColumn("started") + ", " + microsColumn("ended") + ", status"

// ledgerSlot reads the record of name's slot. A plain (consistent) read:
// it runs after ledgerLock in a REPEATABLE READ transaction, and such a
// transaction takes its snapshot at its first consistent read, not at
// START TRANSACTION nor at a locking read; so it sees every write to the
// name's ledger, all committed before the row lock was granted, and
// takes no gap lock where the slot has no record.
var ledgerSlot = `SELECT ` + runColumns + ` FROM {{runs}} WHERE name = ? AND slot = ?`

// ledgerInsert records a claimed run.
const ledgerInsert = `INSERT INTO {{runs}} (name, slot, schedule, owner, fence, attempt, started, ended, status)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// ledgerReplace replaces a slot's record by a rerun's.
const ledgerReplace = `UPDATE {{runs}} SET schedule = ?, owner = ?, fence = ?, attempt = ?, started = ?, ended = ?, status = ?
WHERE name = ? AND slot = ?`

// ledgerCutoff reads the oldest slot a claim keeps: the keep-th newest
// (? is keep-1), counting the claim's own record, as text (whatever the
// DSN's parseTime). None when the name has fewer.
const ledgerCutoff = `SELECT DATE_FORMAT(slot, '%Y-%m-%d %H:%i:%s.%f') FROM {{runs}} WHERE name = ? ORDER BY slot DESC LIMIT 1 OFFSET ?`

// ledgerTrim deletes the name's records older than the cutoff, but never
// the claim's own: a claim of a slot older than those kept leaves keep+1
// records until the next claim trims it, as its runner must still record
// its outcome.
const ledgerTrim = `DELETE FROM {{runs}} WHERE name = ? AND slot < ? AND slot <> ?`

// ledgerFinish records a run's outcome on its slot's record.
const ledgerFinish = `UPDATE {{runs}} SET ended = ?, status = ? WHERE name = ? AND slot = ? AND fence = ?`

// ledgerRuns returns name's records, newest slot first.
var ledgerRuns = `SELECT ` + runColumns + ` FROM {{runs}} WHERE name = ? ORDER BY slot DESC`
