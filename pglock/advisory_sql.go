package pglock

// Advisory-mode statements. {{table}} is the configured table name (the
// pre-0.x fence table, dropped by Migrate), {{seq}} the fence sequence,
// {{holders}} the unlogged table of holders.

// advisoryDDL creates the fence sequence, the holders table and the run
// ledger's tables, and retires the per-name fence table of earlier
// versions: the sequence starts above every fence it ever handed out, and
// the old table is dropped so that a client of an earlier version fails
// loudly instead of granting fences from a counter that no longer rises.
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
	runsDDL,
	ledgersDDL,
}

// advisoryTry tries the session lock on key $1 and, only if it was taken,
// draws the fence from the sequence: one statement, whose cost is one try
// and one nextval (a sequence writes WAL once per 32 values, and a grant
// commits nothing), measured at 1.05-1.1x of a bare pg_try_advisory_lock.
// A refused try is described by a second statement (advisoryHolderOf):
// joining the lookup into this one, even as a branch never taken, cost
// every grant half as much again (the executor sets up the pg_locks scan
// and its sub-plans whether they run or not).
const advisoryTry = `SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval({{seqname}}) END, pg_backend_pid()`

// advisoryHolder finds the backend holding key $1 and its holders row.
const advisoryHolder = `
	SELECT l.pid, h.owner, h.fence FROM pg_locks l LEFT JOIN {{holders}} h ON h.pid = l.pid AND h.key = $1
	WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = ((($1::bigint) >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid`

// advisoryBlock waits in the server for the session lock on key $1, then
// draws the fence. The server queues the waiters and hands the lock to
// the next as each holder unlocks; the caller's context bounds the wait
// (its end cancels the statement and closes the connection).
const advisoryBlock = `SELECT nextval({{seqname}}), pg_backend_pid() FROM (SELECT pg_advisory_lock($1)) l`

// advisoryBlockUntil is advisoryBlock for a caller with a deadline: one
// CASE, whose branches Postgres evaluates in order and only as far as
// needed. It tries first: a free lock costs a try, a clock check and a
// nextval, nothing that a wait needs (a join of subqueries that did the
// same cost 13% more server time per cycle, in executor setup). Only a
// refused try goes on to wait, with the wait's end, until (advisoryUntil),
// computed by the server: it stops waiting then (lock_timeout, set for
// this statement's transaction only, before the lock is requested) and
// answers lock_not_available. A wait that ends in the server leaves no
// queued request behind, where a cancel sent at the deadline may land
// after a release handed the lock to a waiter that has given up (which
// then holds it until its connection closes). The try respects the queue
// as the wait does: Postgres refuses it while others wait.
//
// The timeout alone does not close that gap: a release grants the lock to
// the first queued backend, including one whose timeout has fired but
// which has not run since (a loaded machine). So the statement checks the
// clock once it holds the lock, and a grant that came after until is
// given back at once, in the same statement, and answered as -1: the
// waiter's caller has given up, or is about to, and must not find it
// held until its connection closes. While it waits, the backend shows
// until in its application_name (advisoryMarkWait), so that a try it
// refuses after until can tell it is about to give the lock back.
//
// The branches that set lock_timeout and the mark, and the wait itself,
// test a value that is never NULL: they run for their effect, and the
// evaluation goes on to the next branch.
const advisoryBlockUntil = `SELECT CASE
	WHEN pg_try_advisory_lock($1) THEN CASE WHEN clock_timestamp() < ` + advisoryUntil + ` THEN nextval({{seqname}}) WHEN pg_advisory_unlock($1) THEN -1 END
	WHEN set_config('lock_timeout', greatest(1, ceil(1000 * extract(epoch FROM ` + advisoryUntil + ` - clock_timestamp())))::bigint::text || 'ms', true) IS NULL THEN NULL
	WHEN set_config('application_name', ` + advisoryMarkWait + `, true) IS NULL THEN NULL
	WHEN pg_advisory_lock($1) IS NULL THEN NULL
	WHEN clock_timestamp() < ` + advisoryUntil + ` THEN nextval({{seqname}})
	WHEN pg_advisory_unlock($1) THEN -1
END, pg_backend_pid()`

// advisoryUntil is the end of a bounded attempt, as the server sees it:
// $2 (an interval) after the statement arrived, and no later than $3, the
// caller's deadline by its own clock (both already a margin before the
// deadline). The first bounds a client whose clock is ahead of the
// server's, the second the time a statement spent on its way to the
// server.
const advisoryUntil = `least(statement_timestamp() + $2::interval, $3::timestamptz)`

// advisoryMarkWait is the application_name a bounded attempt shows while
// its statement runs (set for its transaction only): the connection's
// own, cut to 24 characters, followed by " (dlock wait until N)", N the
// attempt's end (advisoryUntil) in Unix ms. A try refused by a backend whose
// mark has passed (advisoryLapsed) knows that backend is a waiter whose
// caller has given up, which gives the lock back as soon as it runs
// (advisoryBlockUntil), and waits for it briefly instead of reporting the
// lock held. Monitoring that matches application_name exactly misses a
// backend for the length of its wait; a prefix match does not.
const advisoryMarkWait = `left(current_setting('application_name'), 24) || ' (dlock wait until ' || (1000 * extract(epoch FROM ` + advisoryUntil + `))::bigint || ')'`

// advisoryLapsed is true when backend x.pid shows the mark of a bounded
// attempt (advisoryMarkWait) whose end has passed.
const advisoryLapsed = `EXISTS (
	SELECT 1 FROM pg_stat_activity a WHERE a.pid = x.pid
		AND substring(a.application_name FROM ' \(dlock wait until ([0-9]+)\)$')::bigint <= (1000 * extract(epoch FROM clock_timestamp()))::bigint)`

// advisoryTryUntil is advisoryTry for a caller with a deadline: a try
// that the server runs after the attempt's end (advisoryUntil) gives the
// lock back at once and answers -1, instead of holding it for a caller
// that has given up until its connection closes. NULL is a refusal. It
// shows no mark: between its try and its clock check there is no wait.
const advisoryTryUntil = `SELECT CASE WHEN NOT pg_try_advisory_lock($1) THEN NULL WHEN clock_timestamp() < ` + advisoryUntil + ` THEN nextval({{seqname}}) WHEN pg_advisory_unlock($1) THEN -1 END, pg_backend_pid()`

// advisoryPublish records this backend's grant in the holders table, for
// Inspect, List, ForceRelease and the holder named to a loser. It runs
// off the grant's path, once a lease has lived watchDelay: the table is
// unlogged, so it costs no WAL flush, but a write and a round trip a
// grant need not pay.
const advisoryPublish = `
INSERT INTO {{holders}} AS h (pid, key, name, owner, fence) VALUES (pg_backend_pid(), $1, $2, $3, $4)
ON CONFLICT (pid) DO UPDATE SET key = excluded.key, name = excluded.name, owner = excluded.owner, fence = excluded.fence`

// advisoryCheck is the health check of a pinned session: its backend pid
// and whether that backend holds advisory key $1 ($1 = high 32 bits,
// $2 = low 32 bits, as pg_locks shows a bigint key).
const advisoryCheck = `
SELECT pg_backend_pid(), EXISTS (
	SELECT 1 FROM pg_locks
	WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1 AND granted)`

// advisoryUnlockAll frees every session advisory lock of a connection
// going back to the pool after a wait that timed out (which may have been
// granted the lock as it timed out): an unpinned connection holds none
// of dlock's locks, so nothing else is freed.
const advisoryUnlockAll = `SELECT pg_advisory_unlock_all()`

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

// advisoryHolderOf finds the backend holding key $1, what the holders
// table says about it (owner NULL when nothing), and whether it is a
// waiter past its end (advisoryLapsed) whose statement has not yet
// given the lock back.
const advisoryHolderOf = `
SELECT x.pid, x.owner, x.fence, ` + advisoryLapsed + `
FROM (` + advisoryHolder + `
	LIMIT 1) x`

// advisoryBump draws a fence for a force-release: above the evicted
// holder's, and below the next grant's.
const advisoryBump = `SELECT nextval({{seqname}})`

// advisoryEvict ends backend $1, which holds the lock of name $4 with
// fence $3 (0 for a holder that is not dlock's): it draws a new fence
// (advisoryBump), terminates the backend, waiting up to 10 s for it to
// exit so that its locks are free when this returns, and, when it exited
// and its grant is known, announces the eviction as "FENCE NAME" on
// channel $2. The NOTIFY is sent when the statement's transaction commits:
// only if the backend was terminated, after it was.
const advisoryEvict = `
WITH b AS MATERIALIZED (
	SELECT nextval({{seqname}}) AS fence, pg_terminate_backend($1, 10000) AS gone
), n AS MATERIALIZED (
	SELECT pg_notify($2, $3::bigint::text || ' ' || $4::text) FROM b WHERE b.gone AND $3::bigint > 0
)
SELECT b.fence, b.gone, (SELECT count(*) FROM n) FROM b`
