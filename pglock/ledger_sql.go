package pglock

// Run-ledger statements, the same in both modes. {{runs}} is the table of
// recorded runs, {{ledgers}} the table of each name's highest fence.
//
// Two tables, because the fence that guards a name's ledger must outlive
// its records: the trim drops old slots, and a claim of a slot older than
// the kept ones can be dropped by the next trim, but a write under an
// older grant must still be refused afterwards. They are named after the
// configured table plus "_runs" and "_ledgers" (a suffix of at most eight
// bytes, as every object's: the table name's limit of 55 bytes stays).

// runsDDL creates the run records: one row per recorded slot of a name.
// Slots, starts and ends are timestamptz (microseconds): a reader can
// query them as times; Started and Ended are the runner's clock, never
// the database's. ended is NULL while a run has no outcome.
const runsDDL = `CREATE TABLE IF NOT EXISTS {{runs}} (
	name     text NOT NULL,
	slot     timestamptz NOT NULL,
	schedule text NOT NULL,
	owner    text NOT NULL,
	fence    bigint NOT NULL,
	attempt  integer NOT NULL,
	started  timestamptz NOT NULL,
	ended    timestamptz,
	status   text NOT NULL DEFAULT '',
	PRIMARY KEY (name, slot)
)`

// ledgersDDL creates one row per name whose ledger was written: the
// highest fence it was written with. Its row lock also orders the writes
// to a name's ledger.
const ledgersDDL = `CREATE TABLE IF NOT EXISTS {{ledgers}} (
	name  text PRIMARY KEY,
	fence bigint NOT NULL
)`

// ledgerFence is the first step of every ledger write: it raises name
// $1's highest fence to the write's fence $2 and returns a row, or, when
// the highest is above $2, returns none and changes nothing. Either way
// the row is locked until the statement's transaction ends (ON CONFLICT
// DO UPDATE locks the row it conflicts with, whether its WHERE holds or
// not), so the writes to one name's ledger run one at a time, each
// decided on the row's latest version.
const ledgerFence = `
	INSERT INTO {{ledgers}} AS g (name, fence) VALUES ($1::text, $2::bigint)
	ON CONFLICT (name) DO UPDATE SET fence = excluded.fence WHERE g.fence <= excluded.fence
	RETURNING g.fence`

// replaceRun is when a claim replaces the slot's record r: asked to
// rerun ($10), and the record has no outcome and an older fence (its
// runner's lease is gone: the claimant holds the lock now).
const replaceRun = `($10::boolean AND r.ended IS NULL AND r.fence < excluded.fence)`

// runColumns are a record's columns after its name, in the order the
// statements return them and storedRun.dest reads them.
const runColumns = `slot, schedule, owner, fence, attempt, started, ended, status`

// ledgerClaim is ClaimRun in one statement: the fence (ledgerFence),
// then the claim, then the trim. $1 name, $2 fence, $3 slot, $4 schedule,
// $5 owner, $6 attempt, $7 started, $8 ended, $9 status, $10 rerun, $11
// keep.
//
// The claim is an upsert on (name, slot) that runs only when the fence
// step returned its row: the statement returns no row when the fence was
// refused, and the slot's record otherwise. On a conflict it updates the
// existing record, always, but to the claim's values only when replaceRun
// holds, and to its own values otherwise: so RETURNING gives the record
// as it stands, read under its row lock at its latest version (ON
// CONFLICT sees a row committed after the statement's snapshot, which a
// plain SELECT would miss). Two concurrent claims of one slot cannot both
// insert, and the second sees the first's record. The claim is the
// claimant's when the record returned is the one it asked for, field by
// field (mine): a record identical to the claim, fence included, can only
// be the same grant's same claim sent again. (PostgreSQL before 18 cannot
// return a row's old values from an update.)
//
// The trim runs only after a claim that is the claimant's: it deletes
// the name's records older than the keep-th newest slot among those the
// statement's snapshot shows and the claimed one. It cannot delete the
// claimed record (written by this statement, invisible to its own
// snapshot), so a claim of a slot older than the newest keep leaves
// keep+1 records until the next claim trims it.
const ledgerClaim = `
WITH g AS (` + ledgerFence + `
), r AS (
	INSERT INTO {{runs}} AS r (name, ` + runColumns + `)
	SELECT $1, $3::timestamptz, $4::text, $5::text, $2, $6::integer, $7::timestamptz, $8::timestamptz, $9::text FROM g
	ON CONFLICT (name, slot) DO UPDATE SET
		schedule = CASE WHEN ` + replaceRun + ` THEN excluded.schedule ELSE r.schedule END,
		owner    = CASE WHEN ` + replaceRun + ` THEN excluded.owner ELSE r.owner END,
		fence    = CASE WHEN ` + replaceRun + ` THEN excluded.fence ELSE r.fence END,
		attempt  = CASE WHEN ` + replaceRun + ` THEN excluded.attempt ELSE r.attempt END,
		started  = CASE WHEN ` + replaceRun + ` THEN excluded.started ELSE r.started END,
		ended    = CASE WHEN ` + replaceRun + ` THEN excluded.ended ELSE r.ended END,
		status   = CASE WHEN ` + replaceRun + ` THEN excluded.status ELSE r.status END
	RETURNING ` + runColumns + `
), c AS (
	SELECT r.*, (r.schedule = $4 AND r.owner = $5 AND r.fence = $2 AND r.attempt = $6
		AND r.started = $7 AND r.ended IS NOT DISTINCT FROM $8 AND r.status = $9) AS mine FROM r
), t AS (
	DELETE FROM {{runs}} d
	WHERE d.name = $1 AND d.slot <> $3 AND EXISTS (SELECT 1 FROM c WHERE c.mine)
		AND d.slot < (SELECT min(k.slot) FROM (
			SELECT u.slot FROM (SELECT slot FROM {{runs}} WHERE name = $1 UNION SELECT $3) u
			ORDER BY u.slot DESC LIMIT $11::bigint) k)
)
SELECT c.mine, ` + runColumns + ` FROM c`

// ledgerFinish is FinishRun in one statement: the fence (ledgerFence),
// then the outcome on the slot's record if it is still the run of the
// write's fence. $1 name, $2 fence, $3 slot, $4 ended, $5 status. It
// updates no row when the fence was refused or the record is not that
// run's.
const ledgerFinish = `
WITH g AS (` + ledgerFence + `
)
UPDATE {{runs}} r SET ended = $4::timestamptz, status = $5::text FROM g
WHERE r.name = $1 AND r.slot = $3::timestamptz AND r.fence = $2`

// ledgerRuns returns name $1's records, newest slot first.
const ledgerRuns = `SELECT ` + runColumns + ` FROM {{runs}} WHERE name = $1 ORDER BY slot DESC`
