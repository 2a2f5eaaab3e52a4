package mysqllock

// Lease-mode statements. {{table}} is the lease table, {{fences}} the
// fence counter. Durations travel as microseconds; expiry is by the
// database clock, in UTC (UTC_TIMESTAMP(6)), so that sessions with
// different time_zone settings agree.

// leaseLockRow reads name's row under its row lock (the grant's first
// statement): token (NULL when free), owner, fence, and the microseconds
// its lease has left (negative once expired).
const leaseLockRow = `SELECT token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{table}} WHERE name = ? FOR UPDATE`

// leaseState reads name's row as leaseLockRow does, without locking it:
// a queued waiter's check (watchRow).
const leaseState = `SELECT token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{table}} WHERE name = ?`

// leaseEnsureRow creates name's row, free, when it has none; committed on
// its own, so that the grant's SELECT … FOR UPDATE always finds a row to
// lock (locking a missing row takes a gap lock, on which two first
// attempts at one name deadlock).
const leaseEnsureRow = `INSERT INTO {{table}} (name, token, fence, expires_at) VALUES (?, NULL, 0, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE name = name`

// drawFence bumps the fence counter; the new value is the statement's
// LAST_INSERT_ID, which the server reports in its OK packet.
const drawFence = `UPDATE {{fences}} SET v = LAST_INSERT_ID(v + 1) WHERE id = 1`

// leaseGrant gives the locked row to a token with its fence.
const leaseGrant = `UPDATE {{table}} SET token = ?, owner = ?, fence = ?,
	expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE name = ?`

// unsetInsertID sets the session's LAST_INSERT_ID to 0 before a batched
// fence draw, so that leaseGrantDrawn changes nothing when the draw found
// no counter row (LAST_INSERT_ID would otherwise keep an older draw).
const unsetInsertID = `DO LAST_INSERT_ID(0)`

// leaseGrantDrawn gives the locked row to a token with the fence drawn
// just before, on the same connection (drawFence), if one was.
const leaseGrantDrawn = `UPDATE {{table}} SET token = ?, owner = ?, fence = LAST_INSERT_ID(),
	expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE name = ? AND LAST_INSERT_ID() > 0`

// leaseRefresh extends token's unexpired lease.
const leaseRefresh = `UPDATE {{table}} SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`

// leaseToken reads the token holding name's row, to say why a
// token-checked statement changed nothing.
const leaseToken = `SELECT token FROM {{table}} WHERE name = ?`

// leaseRelease frees token's row (expired or not), with the owner ? (the
// hand-on mark when the releaser holds the wake key, else empty). The row
// stays, free, until the sweep.
const leaseRelease = `UPDATE {{table}} SET token = NULL, owner = ?, expires_at = UTC_TIMESTAMP(6)
WHERE name = ? AND token = ?`

// leaseSweep deletes free rows older than ? microseconds: fences come
// from the counter, so a deleted row forgets nothing a fence needs.
const leaseSweep = `DELETE FROM {{table}} WHERE token IS NULL AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`

// leaseLive is the condition of a live lease in a row h.
const leaseLive = `h.token IS NOT NULL AND h.expires_at > UTC_TIMESTAMP(6)`

// leaseList returns the live holders whose names start with ?.
const leaseList = `SELECT h.name, h.owner, h.fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at)
FROM {{table}} h WHERE ` + leaseLive + ` AND LEFT(h.name, LENGTH(?)) = ? ORDER BY h.name`

// leaseInspect returns name's live holder, if any.
const leaseInspect = `SELECT h.name, h.owner, h.fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at)
FROM {{table}} h WHERE h.name = ? AND ` + leaseLive

// leaseEvict frees the locked row whoever holds it and gives it the
// force-release's fence.
const leaseEvict = `UPDATE {{table}} SET token = NULL, owner = '', fence = ?, expires_at = UTC_TIMESTAMP(6) WHERE name = ?`

// leaseAdoptRead reads token's row after leaseRefresh extended it: its
// fence and the microseconds left.
const leaseAdoptRead = `SELECT fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM {{table}} WHERE name = ? AND token = ?`
