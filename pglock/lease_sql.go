package pglock

// Lease-mode statements. {{table}} is the quoted table name. Times are by
// the database clock (clock_timestamp(), not the transaction's now(), so a
// statement that waited on a row lock still grants a full TTL); durations
// travel as microseconds.

// leaseDDL creates the lease table. A row outlives its lease (token NULL
// when free) so the fence keeps counting up across releases.
const leaseDDL = `
CREATE TABLE IF NOT EXISTS {{table}} (
	name       text PRIMARY KEY,
	token      text,
	owner      text NOT NULL DEFAULT '',
	fence      bigint NOT NULL,
	expires_at timestamptz
) WITH (fillfactor = 70)`

// leaseAcquire grants name to $2 if it is free, expired, or already $2's
// (a retried attempt whose reply was lost: same fence, no bump), bumping
// the fence otherwise; else it returns the holder.
//
// It is an UPDATE of the existing row, or an INSERT of a new one, rather
// than INSERT ... ON CONFLICT DO UPDATE ... WHERE, because ON CONFLICT
// locks the conflicting row even when its WHERE fails: every failed attempt
// of a herd of waiters would queue on the row lock, the winner among them.
// An UPDATE whose WHERE is false takes no lock; one that meets a row being
// changed waits and re-checks it (READ COMMITTED), so two attempts never
// both win. Two first-ever attempts race on the INSERT: the loser's ON
// CONFLICT DO NOTHING returns nothing, and it sees no holder in its
// snapshot either: no row at all, "held, holder unknown".
const leaseAcquire = `
WITH upd AS (
	UPDATE {{table}} SET
		token = $2,
		owner = $3,
		fence = CASE WHEN token = $2 THEN fence ELSE fence + 1 END,
		expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
	WHERE name = $1 AND (token IS NULL OR token = $2 OR expires_at <= clock_timestamp())
	RETURNING fence
), ins AS (
	INSERT INTO {{table}} (name, token, owner, fence, expires_at)
	SELECT $1, $2, $3, 1, clock_timestamp() + $4::bigint * interval '1 microsecond'
	WHERE NOT EXISTS (SELECT 1 FROM {{table}} WHERE name = $1)
	ON CONFLICT (name) DO NOTHING
	RETURNING fence
), won AS (
	SELECT fence FROM upd UNION ALL SELECT fence FROM ins
)
SELECT true, fence, '', 0::bigint FROM won
UNION ALL
SELECT false, h.fence, h.owner, ` + microsLeft + `
FROM {{table}} h WHERE h.name = $1 AND NOT EXISTS (SELECT 1 FROM won)`

// microsLeft is a row's remaining lease in microseconds, -1 when free.
const microsLeft = `coalesce((extract(epoch FROM h.expires_at - clock_timestamp()) * 1e6)::bigint, -1)`

// leaseRefresh extends $2's unexpired lease; it returns whether it did and
// the token holding the row (before the update), to say why not.
const leaseRefresh = `
WITH r AS (
	UPDATE {{table}} SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
	WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM r), (SELECT token FROM {{table}} WHERE name = $1)`

// leaseRelease frees $2's row, keeping its fence, and notifies waiters on
// channel $3 (delivered at commit, i.e. at once).
const leaseRelease = `
WITH r AS (
	UPDATE {{table}} SET token = NULL, owner = '', expires_at = NULL
	WHERE name = $1 AND token = $2
	RETURNING name
)
SELECT (SELECT count(*) FROM (SELECT pg_notify($3, name) FROM r) n) > 0,
	(SELECT token FROM {{table}} WHERE name = $1)`

// leaseRefreshBatch extends many leases in one statement; one row per
// item, by ordinality.
const leaseRefreshBatch = `
WITH req AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS q(name, token, micros, i)
), r AS (
	UPDATE {{table}} t SET expires_at = clock_timestamp() + req.micros * interval '1 microsecond'
	FROM req WHERE t.name = req.name AND t.token = req.token AND t.expires_at > clock_timestamp()
	RETURNING t.name
)
SELECT req.i, r.name IS NOT NULL, cur.token
FROM req LEFT JOIN r ON r.name = req.name LEFT JOIN {{table}} cur ON cur.name = req.name`

// leaseList returns the live holders whose names start with $1.
const leaseList = `
SELECT h.name, h.owner, h.fence, ` + microsLeft + `
FROM {{table}} h
WHERE h.token IS NOT NULL AND h.expires_at > clock_timestamp() AND starts_with(h.name, $1)
ORDER BY h.name`

// leaseInspect returns name's live holder, if any.
const leaseInspect = `
SELECT h.name, h.owner, h.fence, ` + microsLeft + `
FROM {{table}} h
WHERE h.name = $1 AND h.token IS NOT NULL AND h.expires_at > clock_timestamp()`

// leaseEnsureRow makes sure name has a row, so force-release can bump it.
const leaseEnsureRow = `
INSERT INTO {{table}} (name, token, owner, fence, expires_at)
VALUES ($1, NULL, '', 0, NULL) ON CONFLICT (name) DO NOTHING`

// leaseForceRelease frees name whoever holds it and bumps its fence,
// returning the evicted holder (read under the row lock) and the new fence.
const leaseForceRelease = `
UPDATE {{table}} t SET token = NULL, owner = '', expires_at = NULL, fence = t.fence + 1
FROM (SELECT name, token, owner, fence, expires_at FROM {{table}} WHERE name = $1 FOR UPDATE) h
WHERE t.name = h.name
RETURNING coalesce(h.token IS NOT NULL AND h.expires_at > clock_timestamp(), false), h.owner, h.fence, ` + microsLeft + `, t.fence`
