package pglock

// Advisory-mode statements. {{table}} is the quoted fence table.

// fenceDDL creates the fence counter table: one row per name ever granted,
// with the fence of its latest grant and that grant's owner.
const fenceDDL = `
CREATE TABLE IF NOT EXISTS {{table}} (
	name  text PRIMARY KEY,
	owner text NOT NULL DEFAULT '',
	fence bigint NOT NULL
) WITH (fillfactor = 70)`

// advisoryAcquire tries the session lock on key $1 and, only if it was
// taken, bumps name $2's fence, in one statement. The try is in a CTE
// (volatile, hence evaluated exactly once). It returns whether the lock
// was taken, the fence (the new one, or the holder's), the holder's owner
// when not taken, and this backend's pid for the pinned-session check.
const advisoryAcquire = `
WITH try AS (SELECT pg_try_advisory_lock($1) AS ok),
bump AS (
	INSERT INTO {{table}} AS f (name, owner, fence)
	SELECT $2, $3, 1 FROM try WHERE try.ok
	ON CONFLICT (name) DO UPDATE SET fence = f.fence + 1, owner = excluded.owner
	RETURNING f.fence
)
SELECT try.ok, coalesce((SELECT fence FROM bump), h.fence, 0), coalesce(h.owner, ''), pg_backend_pid()
FROM try LEFT JOIN {{table}} h ON h.name = $2`

// advisoryCheck is the health check of a pinned session: its backend pid
// and whether that backend holds advisory key $1 ($1 = high 32 bits,
// $2 = low 32 bits, as pg_locks shows a bigint key).
const advisoryCheck = `
SELECT pg_backend_pid(), EXISTS (
	SELECT 1 FROM pg_locks
	WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1 AND granted)`

// advisoryRelease unlocks key $1 and notifies waiters on channel $2 with
// name $3, in one statement.
const advisoryRelease = `SELECT pg_advisory_unlock($1) FROM (SELECT pg_notify($2, $3)) n`

// advisoryHeld lists the advisory keys (as pg_locks shows them) held in
// this database, with the backend holding each.
const advisoryHeld = `
SELECT classid::bigint, objid::bigint, pid FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND granted
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// advisoryHolderOf finds the backend holding key ($1 high, $2 low half).
const advisoryHolderOf = advisoryHeld + `
	AND classid = $1::bigint::oid AND objid = $2::bigint::oid`

// advisoryFences reads the fence rows whose names start with $1.
const advisoryFences = `SELECT name, owner, fence FROM {{table}} WHERE starts_with(name, $1) ORDER BY name`

// advisoryFence reads one name's fence row.
const advisoryFence = `SELECT name, owner, fence FROM {{table}} WHERE name = $1`

// advisoryEnsureRow makes sure name has a fence row to bump.
const advisoryEnsureRow = `INSERT INTO {{table}} (name, owner, fence) VALUES ($1, '', 0) ON CONFLICT (name) DO NOTHING`

// advisoryBump raises name's fence for a force-release, returning the
// previous owner and fence (read under the row lock) and the new fence.
const advisoryBump = `
UPDATE {{table}} t SET fence = t.fence + 1
FROM (SELECT name, owner, fence FROM {{table}} WHERE name = $1 FOR UPDATE) h
WHERE t.name = h.name
RETURNING h.owner, h.fence, t.fence`

// advisoryTerminate ends backend $1, waiting up to 10 s for it to exit so
// that its locks are free when this returns.
const advisoryTerminate = `SELECT pg_terminate_backend($1, 10000)`
