package mysqllock

// Lease-mode statements. {{table}} is the lease table, {{fences}} the
// fence counter. Durations travel as microseconds; expiry is by the
// database clock, in UTC (UTC_TIMESTAMP(6)), so that sessions with
// different time_zone settings agree.

// leaseLockRow reads name's row under its row lock (a force-release's first
// statement): token (NULL when free), owner, fence, and the microseconds
// its lease has left (negative once expired).
const leaseLockRow = `SELECT token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{table}} WHERE name = ? FOR UPDATE`

// leaseState reads name's row as leaseLockRow does, without locking it:
// a queued waiter's check (watchRow).
const leaseState = `SELECT token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{table}} WHERE name = ?`

// leaseEnsureRow creates name's row, free, when it has none, with the
// fence floor (the counter's value) as its fence; committed on its own,
// so that the grant's SELECT … FOR UPDATE always finds a row to lock
// (locking a missing row takes a gap lock, on which two first attempts at
// one name deadlock). It inserts nothing when the counter has no row.
const leaseEnsureRow = `INSERT INTO {{table}} (name, token, fence, expires_at)
SELECT ?, NULL, v, UTC_TIMESTAMP(6) FROM {{fences}} WHERE id = 1
ON DUPLICATE KEY UPDATE name = name`

// drawFence bumps the fence counter; the new value is the statement's
// LAST_INSERT_ID, which the server reports in its OK packet. Get_lock
// mode draws its fences so; lease mode's counter is the floor of new rows.
const drawFence = `UPDATE {{fences}} SET v = LAST_INSERT_ID(v + 1) WHERE id = 1`

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

// The sweep deletes free rows older than ? microseconds in three steps:
// the highest fence among them (leaseSweepMax), the counter raised to it
// (leaseRaiseFloor), and the rows deleted whose fence the counter now
// covers (leaseSweep). A row created later for a swept name starts from
// the counter, so its next fence is above every fence the name had.
const (
	leaseSweepMax = `SELECT COALESCE(MAX(fence), 0) FROM {{table}}
WHERE token IS NULL AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND`
	leaseRaiseFloor = `UPDATE {{fences}} SET v = GREATEST(v, ?) WHERE id = 1`
	leaseSweep      = `DELETE FROM {{table}}
WHERE token IS NULL AND expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND fence <= ?`
)

// leaseLive is the condition of a live lease in a row h.
const leaseLive = `h.token IS NOT NULL AND h.expires_at > UTC_TIMESTAMP(6)`

// leaseList returns the live holders whose names start with ?.
const leaseList = `SELECT h.name, h.owner, h.fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at)
FROM {{table}} h WHERE ` + leaseLive + ` AND LEFT(h.name, LENGTH(?)) = ? ORDER BY h.name`

// leaseInspect returns name's live holder, if any.
const leaseInspect = `SELECT h.name, h.owner, h.fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at)
FROM {{table}} h WHERE h.name = ? AND ` + leaseLive

// leaseEvict frees the locked row whoever holds it and gives it the
// force-release's fence (the row's next).
const leaseEvict = `UPDATE {{table}} SET token = NULL, owner = '', fence = ?, expires_at = UTC_TIMESTAMP(6) WHERE name = ?`

// leaseAdoptRead reads token's row after leaseRefresh extended it: its
// fence and the microseconds left.
const leaseAdoptRead = `SELECT fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM {{table}} WHERE name = ? AND token = ?`
