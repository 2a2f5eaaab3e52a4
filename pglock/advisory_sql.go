package pglock

// Advisory-mode statements. {{table}} is the configured table name (the
// pre-0.x fence table, dropped by Migrate), {{seq}} the fence sequence,
// {{holders}} the unlogged table of holders.

// advisoryDDL creates the fence sequence and the holders table, and
// retires the per-name fence table of earlier versions: the sequence
// starts above every fence it ever handed out, and the old table is
// dropped so that a client of an earlier version fails loudly instead of
// granting fences from a counter that no longer rises.
//
// The holders table describes, for each backend, the dlock grant it made
// last (key, name, owner, fence). It is UNLOGGED: written without WAL,
// emptied by crash recovery, exactly like the advisory locks it
// describes. A row is current only while pg_locks shows its backend
// holding its key; rows of backends that are gone are swept.
var advisoryDDL = []string{
	`CREATE SEQUENCE IF NOT EXISTS {{seq}} AS bigint MINVALUE 1 NO CYCLE`,
	`CREATE UNLOGGED TABLE IF NOT EXISTS {{holders}} (
	pid   integer PRIMARY KEY,
	key   bigint NOT NULL,
	name  text NOT NULL,
	owner text NOT NULL,
	fence bigint NOT NULL
) WITH (fillfactor = 50)`,
	`DO $$ BEGIN
	IF to_regclass({{tablename}}) IS NOT NULL THEN
		PERFORM setval({{seqname}}, x.m, true) FROM (SELECT max(fence) AS m FROM {{table}}) x
			WHERE x.m >= (SELECT last_value FROM {{seq}});
		DROP TABLE {{table}};
	END IF;
END $$`,
}

// advisoryTry tries the session lock on key $1 and, only if it was taken,
// draws the fence from the sequence and records this backend as the
// holder, in one statement. When the lock is held, it returns the
// holder's owner and fence (owner NULL when no dlock grant describes the
// holding backend: another program's lock, or a grant not yet committed).
// The holder lookup runs only when the lock was not taken: the
// uncontended path is one try, one nextval, one unlogged upsert.
const advisoryTry = `
WITH t AS (SELECT pg_try_advisory_lock($1) AS ok),
g AS (SELECT nextval({{seqname}}) AS fence FROM t WHERE t.ok),
p AS (
	INSERT INTO {{holders}} AS h (pid, key, name, owner, fence)
	SELECT pg_backend_pid(), $1, $2, $3, g.fence FROM g
	ON CONFLICT (pid) DO UPDATE SET key = excluded.key, name = excluded.name, owner = excluded.owner, fence = excluded.fence
)
SELECT t.ok, coalesce((SELECT fence FROM g), x.fence, 0), x.owner, pg_backend_pid()
FROM t LEFT JOIN LATERAL (` + advisoryHolder + `) x ON true`

// advisoryHolder finds the dlock holder of key $1 (split into $4 high and
// $5 low 32 bits, as pg_locks shows a bigint key), only when t.ok is
// false (a one-time filter: pg_locks is not read on a grant).
const advisoryHolder = `
	SELECT h.owner, h.fence FROM pg_locks l JOIN {{holders}} h ON h.pid = l.pid AND h.key = $1
	WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = $4::bigint::oid AND l.objid = $5::bigint::oid AND NOT t.ok
	LIMIT 1`

// advisoryBlock waits in the server for the session lock on key $1, then
// draws the fence and records the holder, in one statement. The server
// queues the waiters; the caller's context bounds the wait (its end
// cancels the statement and closes the connection).
const advisoryBlock = `
WITH t AS (SELECT pg_advisory_lock($1)),
g AS (SELECT nextval({{seqname}}) AS fence FROM t),
p AS (
	INSERT INTO {{holders}} AS h (pid, key, name, owner, fence)
	SELECT pg_backend_pid(), $1, $2, $3, g.fence FROM g
	ON CONFLICT (pid) DO UPDATE SET key = excluded.key, name = excluded.name, owner = excluded.owner, fence = excluded.fence
)
SELECT g.fence, pg_backend_pid() FROM g`

// advisoryCheck is the health check of a pinned session: its backend pid
// and whether that backend holds advisory key $1 ($1 = high 32 bits,
// $2 = low 32 bits, as pg_locks shows a bigint key).
const advisoryCheck = `
SELECT pg_backend_pid(), EXISTS (
	SELECT 1 FROM pg_locks
	WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1 AND granted)`

// advisoryRelease unlocks key $1. Nobody is notified: waiters block in
// the server (advisoryBlock), which hands the lock to the next of them.
const advisoryRelease = `SELECT pg_advisory_unlock($1)`

// advisoryEpoch runs once on every connection before its first grant: it
// advances the sequence past every value a crash could have handed out
// without its pre-logged WAL record reaching disk (at most 32 per backend
// that was pre-logging at the time, PostgreSQL's SEQ_LOG_VALS), so that no
// fence is ever handed out twice, whatever the timing of a crash; and it
// sweeps the holders rows of backends that are gone.
const advisoryEpoch = `
WITH s AS (
	SELECT setval({{seqname}}, nextval({{seqname}}) + 32 * (current_setting('max_connections')::bigint + 64), true)
), d AS (
	DELETE FROM {{holders}} h WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid)
)
SELECT setval FROM s`

// advisoryHeld lists the dlock holders in this database whose names start
// with $1: a holders row whose backend holds its key now.
const advisoryHeld = `
SELECT h.name, h.owner, h.fence FROM {{holders}} h JOIN pg_locks l
	ON l.pid = h.pid AND l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
	AND l.classid = ((h.key >> 32) & 4294967295)::oid AND l.objid = (h.key & 4294967295)::oid
WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND starts_with(h.name, $1)
ORDER BY h.name`

// advisoryHolderOf finds the backend holding key ($1 high, $2 low half),
// and what the holders table says about it (owner NULL when nothing).
const advisoryHolderOf = `
SELECT l.pid, h.owner, h.fence FROM pg_locks l LEFT JOIN {{holders}} h ON h.pid = l.pid AND h.key = $3
WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = $1::bigint::oid AND l.objid = $2::bigint::oid
LIMIT 1`

// advisoryBump draws a fence for a force-release: above the evicted
// holder's, and below the next grant's.
const advisoryBump = `SELECT nextval({{seqname}})`

// advisoryTerminate ends backend $1, waiting up to 10 s for it to exit so
// that its locks are free when this returns.
const advisoryTerminate = `SELECT pg_terminate_backend($1, 10000)`
