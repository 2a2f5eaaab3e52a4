package pglock

// Lease-mode statements. {{table}} is the quoted table name, {{seq}} the
// fence sequence. Durations travel as microseconds; expiry is by the
// database clock.

import "strings"

// leaseDDL creates the lease table, the fence sequence and the run
// ledger's tables, and upgrades a table of an earlier version: the sequence starts above every fence in
// the table, so no fence ever goes backwards across the upgrade.
//
// A row is a lease (token set) or, once released, a tombstone (token
// NULL) that remembers the last tokens released on the name (dead), so
// that an attempt the server runs after its caller gave up and released
// its token grants nothing. Tombstones are swept once they are older than
// tombstoneAge.
var leaseDDL = []string{
	`CREATE SEQUENCE IF NOT EXISTS {{seq}} AS bigint MINVALUE 1 NO CYCLE`,
	`CREATE TABLE IF NOT EXISTS {{table}} (
	name       text PRIMARY KEY,
	token      text,
	owner      text NOT NULL DEFAULT '',
	fence      bigint NOT NULL,
	expires_at timestamptz
) WITH (fillfactor = 70)`,
	`ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS dead text[] NOT NULL DEFAULT '{}'`,
	`ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS waiters text[] NOT NULL DEFAULT '{}'`,
	`ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS reserved text`,
	seedSeq,
	runsDDL,
	ledgersDDL,
}

// seedSeq raises the sequence to the highest fence in {{table}} when that
// is not below it (an upgrade from per-name fences). It never lowers the
// sequence, and is a no-op once every fence in the table came from it.
const seedSeq = `SELECT setval({{seqname}}, x.m, true) FROM (SELECT max(fence) AS m FROM {{table}}) x
WHERE x.m >= (SELECT last_value FROM {{seq}})`

// grantable is when an attempt by token $2 may take a row l: it is free,
// expired (by the statement's clock, which can only be early), or already
// $2's (a retried attempt whose reply was lost), and $2 was not released.
const grantable = `(l.token IS NULL OR l.token = $2 OR l.expires_at <= statement_timestamp()) AND NOT ($2 = ANY (l.dead))`

// leaseAcquire grants name to $2 when grantable: an INSERT of a new row or
// an update of the existing one, the fence drawn from the sequence (kept
// for a retried attempt), the queue of waiters left alone: a try's
// token never queued (a waiter's attempts are all leaseAcquireInTurn,
// whose grant takes it out of the queue). It returns the fence, or no
// row when the lock was not granted: then leaseHolder says why, in a
// statement of its own (a new snapshot, which sees the row that made this
// one lose). A waiter's attempt is leaseAcquireInTurn instead. The
// uncontended path is this one statement, as a hand-written upsert lease
// is.
const leaseAcquire = `
INSERT INTO {{table}} AS l (name, token, owner, fence, expires_at)
VALUES ($1, $2, $3, nextval({{seqname}}), clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET token = excluded.token, owner = excluded.owner,
	fence = CASE WHEN l.token = $2 THEN l.fence ELSE ` + freshFence + ` END,
	expires_at = excluded.expires_at, reserved = NULL
WHERE ` + grantable + `
RETURNING l.fence`

// freshFence is the fence of a grant that updates the name's row l: the
// proposed row's, drawn when the statement began, unless the row carries
// one as high or higher, and then one drawn now. The proposed row's fence
// is drawn before the statement waits for the row's lock; while it
// waits, another grant can draw a higher one, and be released, and the
// statement then grants the row's latest version: with the fence drawn
// first, the later grant would carry the lower fence. The row always
// holds its last grant's fence (or a force-release's, higher), so a grant
// above it is above every earlier grant of the name.
const freshFence = `CASE WHEN excluded.fence > l.fence THEN excluded.fence ELSE nextval({{seqname}}) END`

// leaseAcquireInTurn is a waiter's attempt (AcquireWait): one statement
// that either grants the lock as leaseAcquire does, when it is grantable
// and the waiter's turn (inTurn), or else puts $2 at the tail of the
// row's queue of waiters (its element $5, see wake.go; once; a queue of 64
// takes no more, and a waiter left out polls) when the row is held by
// another live lease or was just released to another waiter (queueable). Both are decided on
// the row's latest version under its lock, as the upsert's conflict
// handling reads it. It returns whether $2 holds the lock now, its fence,
// and otherwise the holder (none for a lock in hand-over) and, for a lock
// in hand-over, the microseconds left of the other waiter's reservation
// (-1 otherwise): a waiter queued behind it retries when it lapses, for
// nobody is notified then; and last, the database clock in microseconds
// (serverMicros), from which the time of a hand-off is told (driver.Turn). No
// row means neither: the lock is free again (or $2 was released);
// leaseHolder then says why.
//
// Before, a waiter's attempt was the grant, and when it lost a second
// statement to queue: four statements per critical section under
// contention (lose, queue, win, release), three now.
const leaseAcquireInTurn = `
INSERT INTO {{table}} AS l (name, token, owner, fence, expires_at)
VALUES ($1, $2, $3, nextval({{seqname}}), clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (name) DO UPDATE SET` + inTurnSet + `
WHERE ` + inTurnWhere + `
RETURNING coalesce(l.token = $2, false), ` + inTurnAnswer

// inTurnSet is what leaseAcquireInTurn changes in a row it grants (the
// waiter's token, owner, a fence and expiry of excluded, the proposed row;
// out of the queue) or queues $2 in (its element $5 at the tail).
const inTurnSet = `
	token = CASE WHEN ` + grantInTurn + ` THEN excluded.token ELSE l.token END,
	owner = CASE WHEN ` + grantInTurn + ` THEN excluded.owner ELSE l.owner END,
	fence = CASE WHEN ` + grantInTurn + ` AND l.token IS DISTINCT FROM $2 THEN ` + freshFence + ` ELSE l.fence END,
	expires_at = CASE WHEN ` + grantInTurn + ` THEN excluded.expires_at ELSE l.expires_at END,
	waiters = CASE WHEN ` + grantInTurn + ` THEN array_remove(array_remove(l.waiters, $5::text), $2)
		WHEN $5 = ANY (l.waiters) OR $2 = ANY (l.waiters) OR cardinality(l.waiters) >= 64 THEN l.waiters ELSE l.waiters || $5::text END,
	reserved = CASE WHEN ` + grantInTurn + ` THEN NULL ELSE l.reserved END`

// inTurnWhere is when leaseAcquireInTurn changes a row: to grant it or to
// queue.
const inTurnWhere = grantInTurn + ` OR ` + queueable

// inTurnAnswer is the rest of leaseAcquireInTurn's answer, after whether
// $2 holds the row: its fence, owner, time left, the reservation's time
// left, and the database clock.
const inTurnAnswer = `l.fence, l.owner,
	coalesce((extract(epoch FROM l.expires_at - clock_timestamp()) * 1e6)::bigint, -1),
	CASE WHEN l.token IS NULL THEN greatest(0, (extract(epoch FROM l.expires_at + ` + reservation + ` - clock_timestamp()) * 1e6)::bigint) ELSE -1 END,
	` + serverMicros

// grantInTurn is when a waiter's attempt takes the row: grantable, and its
// turn (inTurn).
const grantInTurn = `(` + grantable + inTurn + `)`

// inTurn is added to a waiter's grant: a lock just released to a queued
// waiter (reserved, notified) goes to that waiter, unless it has not come
// for it within 50 ms (it died without leaving the queue). A try is not
// held back by it: it never waits.
const inTurn = ` AND (l.reserved IS NULL OR ` + reservedFor + ` = $2 OR l.token IS NOT NULL
	OR l.expires_at < statement_timestamp() - ` + reservation + `)`

// queueable is when a waiter that does not take the row joins its queue:
// it is held by another live lease, or free and reserved for another
// waiter whose turn has not lapsed, and $2 was not released.
const queueable = `(NOT ($2 = ANY (l.dead)) AND (
	(l.token IS NOT NULL AND l.token <> $2 AND l.expires_at > clock_timestamp())
	OR (l.token IS NULL AND ` + reservedFor + ` <> $2 AND l.expires_at >= clock_timestamp() - ` + reservation + `)))`

// reservedFor is the token the row is reserved for: reserved holds the
// head's queue element ("TOKEN@CHANNEL", or a bare token queued by an
// earlier version).
const reservedFor = `split_part(l.reserved, '@', 1)`

// notifyHead wakes the waiter a row was just reserved for (reserved, its
// queue element): on the wake channel of the driver that queued it, with
// its token as the payload; on the table's channel $3 for a bare token
// queued by an earlier version.
const notifyHead = `pg_notify(coalesce(nullif(split_part(l.reserved, '@', 2), ''), $3), split_part(l.reserved, '@', 1))`

// serverMicros is the database clock now, in microseconds since the epoch.
const serverMicros = `(date_part('epoch', clock_timestamp()) * 1e6)::bigint`

// reservation is how long a lock released to a queued waiter is kept for
// it (see inTurn).
const reservation = `interval '50 milliseconds'`

// leaseHolder describes the row after a losing attempt: its token (NULL
// when free), owner, fence, time left, and whether $2 was released.
const leaseHolder = `
SELECT h.token, h.owner, h.fence, ` + microsLeft + `, $2 = ANY (h.dead)
FROM {{table}} h WHERE h.name = $1`

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

// leaseRelease frees $2's row and records $2 among the name's released
// tokens. When waiters queue, the head of the queue is notified on its
// driver's wake channel (notifyHead: the payload is its token, one waiter
// is woken, not the herd) and moved to the tail, so that a waiter that
// died without leaving the queue costs one wasted wake-up, not a stuck
// queue; a waiter leaves the queue when it wins. The lock is reserved for
// that waiter (reservation). It returns a row when $2 held the lock (the
// reserved waiter's element, or NULL), none otherwise: then
// leaseTombstone runs. It is a bare UPDATE that notifies in its RETURNING
// list, which sees the updated row: reserved is the old head of the
// queue, the waiter notified.
const leaseRelease = `
UPDATE {{table}} l SET token = NULL, owner = '', expires_at = clock_timestamp(),
	dead = ` + deadAppend + `, waiters = ` + rotate + `,
	reserved = CASE WHEN cardinality(l.waiters) > 0 THEN l.waiters[1] END
WHERE l.name = $1 AND l.token = $2
RETURNING l.reserved, CASE WHEN l.reserved IS NOT NULL THEN ` + notifyHead + `::text END`

// leaseReleaseHandOff frees $2's row as leaseRelease does, and when
// waiters queue, it hands the lock to the head of the queue in this
// statement (grantHead): the row is the head's, with its token and owner
// (from its queue element) and a fence from the sequence, for
// handOffWindow, a provisional grant that the waiter's first refresh
// extends to its TTL; the head leaves the queue. Its driver is notified
// on its wake channel, "TOKEN p FENCE MICROS" with the database time of
// the grant (handOffNotice): the waiter goes ahead with no statement of
// its own. A head that died while it queued holds the lock for the
// window, not a TTL. reserved keeps the head's element, which the
// notification reads (RETURNING sees only the updated row); it does not
// hold anyone back while the row has a token (inTurn).
//
// A head whose wait has ended, or that an earlier version queued (a bare
// token), is served as leaseRelease serves it. The driver runs this
// statement for a name it saw contended lately (Release), leaseRelease
// otherwise: deciding a hand-off costs the release of a lock nobody waits
// for about a tenth more on the database.
const leaseReleaseHandOff = `
UPDATE {{table}} l SET
	token = CASE WHEN ` + noWaiters + ` THEN NULL WHEN ` + grantHead + ` THEN split_part(l.waiters[1], '@', 1) END,
	owner = CASE WHEN ` + noWaiters + ` THEN '' WHEN ` + grantHead + ` THEN ` + headOwner + ` ELSE '' END,
	fence = CASE WHEN ` + noWaiters + ` THEN l.fence WHEN ` + grantHead + ` THEN nextval({{seqname}}) ELSE l.fence END,
	expires_at = CASE WHEN ` + noWaiters + ` THEN clock_timestamp() WHEN ` + grantHead + ` THEN clock_timestamp() + ` + handOffWindow + `
		ELSE clock_timestamp() END,
	dead = ` + deadAppend + `,
	waiters = CASE WHEN ` + noWaiters + ` THEN l.waiters WHEN ` + grantHead + ` THEN l.waiters[2:] ELSE ` + rotate + ` END,
	reserved = CASE WHEN ` + noWaiters + ` THEN NULL ELSE l.waiters[1] END
WHERE l.name = $1 AND l.token = $2
RETURNING l.token, CASE WHEN l.token IS NOT NULL THEN ` + handOffNotice + `::text
	WHEN l.reserved IS NOT NULL THEN ` + notifyHead + `::text END`

// noWaiters is when nobody queues: a release then decides nothing more,
// and each column's CASE tests it first, so that the uncontended release
// pays for none of grantHead (CASE evaluates its conditions in order).
const noWaiters = `cardinality(l.waiters) = 0`

// grantHead is when a release grants the lock to the head of the queue:
// its element names a wake channel, a deadline and an owner
// ("TOKEN@CHANNEL@DEADLINE@OWNER"), and the head still has a millisecond
// of its wait left. A head whose wait has ended (it gave up, and its
// leaving the queue has not reached the database yet) is reserved for
// instead, which does not hold back a TryAcquire, and moved to the tail.
// The deadline is compared with statement_timestamp(), which stays the
// same through the statement: every column's CASE decides alike. The
// releasing token's own entry (never left there by dlock) is not granted.
const grantHead = `(l.waiters[1] ~ '^[^@]+@[^@]+@[0-9]*@' AND split_part(l.waiters[1], '@', 1) <> $2 AND
	coalesce(nullif(split_part(l.waiters[1], '@', 3), '')::bigint, 9223372036854775807) >
		(date_part('epoch', statement_timestamp()) * 1e6)::bigint + 1000)`

// headOwner is the owner in the head's element (everything after the
// third "@": an owner may hold "@" itself).
const headOwner = `regexp_replace(l.waiters[1], '^[^@]*@[^@]*@[^@]*@', '')`

// handOffWindow is how long a hand-off holds the lock for a waiter that
// has not yet shown it is alive (driver.Grant.Window); the Go side is
// handOffWindowGo.
const handOffWindow = `interval '1 second'`

// handOffNotice tells the head of the queue, on its wake channel, that a
// release granted it the lock: "TOKEN p FENCE MICROS", MICROS the
// database time of the grant (its expiry less the window). Read on the
// updated row: token and fence are the grant's, reserved its element.
const handOffNotice = `pg_notify(split_part(l.reserved, '@', 2), l.token || ' p ' || l.fence || ' ' ||
	(extract(epoch FROM l.expires_at - ` + handOffWindow + `) * 1e6)::bigint)`

// leaseTombstone records $2 as released on a name it does not hold,
// whatever the row's state: it creates the row when there is none, and
// when an attempt of $2 is running (inserting or updating the row) it
// waits for it and then frees what it granted. A stalled attempt that
// runs later finds $2 released and grants nothing. It returns the token
// holding the row now.
//
// $2 also leaves the queue (its element, whoever queued it: see wake.go),
// and when the lock was in $2's hands (what its
// stalled attempt granted) or reserved for $2 (a waiter that gave up just
// as the lock was released to it), the lock is handed to the next waiter,
// as leaseRelease does: reserved for the head of the queue, which is
// notified (notifyHead) and moved to the tail. Before, a waiter that
// gave up once notified left the lock reserved for nobody, and the queue
// behind it slept until its poll (maxPoll, 250 ms) with nobody notified.
// The reserved waiter of a free row is notified whether or not this
// statement handed it the lock: a second notification only makes it
// attempt, and win, again.
const leaseTombstone = `
INSERT INTO {{table}} AS l (name, token, owner, fence, expires_at, dead)
VALUES ($1, NULL, '', 0, clock_timestamp(), ARRAY[$2::text])
ON CONFLICT (name) DO UPDATE SET
	token = CASE WHEN l.token = $2 THEN NULL ELSE l.token END,
	owner = CASE WHEN l.token = $2 THEN '' ELSE l.owner END,
	expires_at = CASE WHEN ` + handOver + ` THEN clock_timestamp() ELSE l.expires_at END,
	dead = ` + deadAppend + `,
	reserved = CASE WHEN ` + handOver + ` THEN (` + without + `)[1] ELSE l.reserved END,
	waiters = CASE WHEN ` + handOver + ` THEN ` + rotateWithout + ` ELSE ` + without + ` END
RETURNING l.token, CASE WHEN l.token IS NULL AND l.reserved IS NOT NULL THEN ` + notifyHead + `::text END`

// handOver is when leaseTombstone hands the lock to the next waiter: $2
// holds it (its stalled attempt granted it) or it is free and reserved
// for $2.
const handOver = `(l.token = $2 OR (l.token IS NULL AND ` + reservedFor + ` = $2))`

// without is the row's waiters without $2's element or $2 itself, in
// their order.
const without = `array(SELECT w FROM unnest(l.waiters) WITH ORDINALITY AS u(w, i) WHERE split_part(w, '@', 1) <> $2 ORDER BY i)`

// rotateWithout is the row's waiters without $2, the head moved to the
// tail.
const rotateWithout = `(` + without + `)[2:] || (` + without + `)[1:1]`

// rotate moves the head of a row's waiters queue to its tail.
const rotate = `CASE WHEN cardinality(l.waiters) > 1 THEN l.waiters[2:] || l.waiters[1] ELSE l.waiters END`

// deadAppend adds $2 to a row's released tokens, keeping the last
// keptDead (8).
const deadAppend = `(l.dead || $2::text)[greatest(1, cardinality(l.dead) - 6):]`

// leaseSweep deletes the tombstones older than $1 microseconds.
const leaseSweep = `DELETE FROM {{table}} WHERE token IS NULL AND expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'`

// leaseRefreshBatch extends many leases in one statement; it returns the
// ordinal of each item it extended (see RefreshBatch for the others).

const leaseRefreshBatch = `
WITH req AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS q(name, token, micros, i)
)
UPDATE {{table}} t SET expires_at = clock_timestamp() + req.micros * interval '1 microsecond'
FROM req WHERE t.name = req.name AND t.token = req.token AND t.expires_at > clock_timestamp()
RETURNING req.i`

// leaseReleaseBatch frees many leases in one statement (by token; a
// lease not held is left alone), as leaseRelease frees one: each row's
// released token recorded, and when waiters queue, the lock reserved for
// the head of its queue, which is notified (notifyHead) and moved to the
// tail. It returns the ordinal of each item it freed.
const leaseReleaseBatch = `
WITH req AS (
	SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS q(name, token, i)
)
UPDATE {{table}} l SET token = NULL, owner = '', expires_at = clock_timestamp(),
	dead = (l.dead || req.token)[greatest(1, cardinality(l.dead) - 6):], waiters = ` + rotate + `,
	reserved = CASE WHEN cardinality(l.waiters) > 0 THEN l.waiters[1] END
FROM req WHERE l.name = req.name AND l.token = req.token
RETURNING req.i, CASE WHEN l.reserved IS NOT NULL THEN ` + notifyHead + `::text END`

// leaseTokens returns, by ordinal, the token holding each name of $1
// (NULL when free or without a row): why a batch left an item alone.
const leaseTokens = `
SELECT q.i, cur.token FROM unnest($1::text[]) WITH ORDINALITY AS q(name, i)
LEFT JOIN {{table}} cur ON cur.name = q.name`

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

// leaseForceRelease frees name whoever holds it and gives it a new fence
// from the sequence, returning the evicted holder (read under the row
// lock) and the new fence. A free name gets a tombstone row carrying the
// new fence. An evicted holder's grant is announced as "FENCE NAME" on
// channel $2 (the eviction channel), sent when the statement's transaction
// commits, to every client's WatchEvictions. The fence is drawn once the
// row is locked (f reads h): a grant in progress has drawn its own by
// then, and the new fence is above it.
const leaseForceRelease = `
WITH h AS (
	SELECT name, token, owner, fence, expires_at FROM {{table}} WHERE name = $1 FOR UPDATE
), f AS (SELECT nextval({{seqname}}) AS fence FROM (SELECT count(*) FROM h) x), u AS (
	INSERT INTO {{table}} AS l (name, token, owner, fence, expires_at)
	SELECT $1, NULL, '', f.fence, clock_timestamp() FROM f
	ON CONFLICT (name) DO UPDATE SET token = NULL, owner = '', expires_at = clock_timestamp(), fence = excluded.fence,
		dead = CASE WHEN l.token IS NULL THEN l.dead ELSE (l.dead || l.token)[greatest(1, cardinality(l.dead) - 6):] END
), n AS MATERIALIZED (
	SELECT pg_notify($2, h.fence::text || ' ' || h.name) FROM h WHERE h.token IS NOT NULL
)
SELECT coalesce((SELECT h.token IS NOT NULL AND h.expires_at > clock_timestamp() FROM h), false),
	coalesce((SELECT owner FROM h), ''), coalesce((SELECT fence FROM h), 0),
	coalesce((SELECT ` + microsLeft + ` FROM h), -1), (SELECT fence FROM f), (SELECT count(*) FROM n)`

// coalescedMark starts the statements that carry the calls one driver's
// goroutines make at the same moment (lease_coalesce.go). They hold a few
// items, so they are prepared once and may run on Postgres's generic
// plan, unlike the batches of up to 1,000 of RefreshBatch and
// ReleaseBatch, which are planned for each call.
const coalescedMark = "-- coalesced calls\n"

// leaseAcquireMany is leaseAcquire for several names at once, each name
// once, in the order given (sorted, so that two such statements lock
// their rows in the same order): every item is decided as leaseAcquire
// decides it alone (grantableExcluded is grantable of the item's own
// token). It returns the name and fence of each item it granted.
const leaseAcquireMany = coalescedMark + `INSERT INTO {{table}} AS l (name, token, owner, fence, expires_at)
SELECT q.name, q.token, q.owner, nextval({{seqname}}), clock_timestamp() + q.micros * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS q(name, token, owner, micros)
ON CONFLICT (name) DO UPDATE SET token = excluded.token, owner = excluded.owner,
	fence = CASE WHEN l.token = excluded.token THEN l.fence ELSE ` + freshFence + ` END,
	expires_at = excluded.expires_at, reserved = NULL
WHERE ` + grantableExcluded + `
RETURNING l.name, l.fence`

// grantableExcluded is grantable for the token of the item an INSERT
// proposes (excluded.token) instead of $2.
const grantableExcluded = `(l.token IS NULL OR l.token = excluded.token OR l.expires_at <= statement_timestamp()) AND NOT (excluded.token = ANY (l.dead))`

// leaseReleaseMany is leaseRelease for several leases at once, each name
// once, in the order given: a row is freed as leaseRelease frees it, its
// head waiter notified on its channel ($3: the table's, for an element
// queued by an earlier version). It returns the name of each lease it
// freed and, when waiters queue, the notification's channel; the others
// were not held by their token (Release's tombstone path).
const leaseReleaseMany = coalescedMark + `UPDATE {{table}} l SET token = NULL, owner = '', expires_at = clock_timestamp(),
	dead = (l.dead || q.token)[greatest(1, cardinality(l.dead) - 6):], waiters = ` + rotate + `,
	reserved = CASE WHEN cardinality(l.waiters) > 0 THEN l.waiters[1] END
FROM unnest($1::text[], $2::text[]) AS q(name, token)
WHERE l.name = q.name AND l.token = q.token
RETURNING l.name, CASE WHEN l.reserved IS NOT NULL THEN ` + notifyHead + `::text END`

// leaseAcquireInTurnMany is leaseAcquireInTurn for the attempts of
// several waiters at once, each name once, in the order given. An
// INSERT's conflict handling sees only the proposed row, which has no
// place for a waiter's queue element, so the statement is two: an UPDATE
// of the rows that exist, each decided and changed as leaseAcquireInTurn
// decides and changes it (inTurnSet and inTurnWhere, written for the
// item's own values by inTurnItem), and an INSERT of the rows that do
// not, granted as leaseAcquireInTurn's INSERT grants them. It returns the
// name of each item that holds the lock or queued, then
// leaseAcquireInTurn's answer. An item with no answer is the single
// statement's "no row": the lock is free again or the token released, or,
// as an UPDATE skips a row deleted meanwhile and the INSERT yields to a
// row inserted meanwhile, the row changed under the statement; the
// waiter asks why (leaseHolder) and attempts again.
var leaseAcquireInTurnMany = coalescedMark + `WITH q AS (
	SELECT q.name, q.token, q.owner, q.elem, clock_timestamp() + q.micros * interval '1 microsecond' AS expires_at
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) AS q(name, token, owner, micros, elem)
), u AS (
	UPDATE {{table}} l SET` + inTurnItem.Replace(inTurnSet) + `
	FROM q WHERE l.name = q.name AND (` + inTurnItem.Replace(inTurnWhere) + `)
	RETURNING l.name, coalesce(l.token = q.token, false), ` + inTurnAnswer + `
), i AS (
	INSERT INTO {{table}} AS l (name, token, owner, fence, expires_at)
	SELECT q.name, q.token, q.owner, nextval({{seqname}}), q.expires_at FROM q
	WHERE NOT EXISTS (SELECT FROM {{table}} x WHERE x.name = q.name)
	ON CONFLICT (name) DO NOTHING
	RETURNING l.name, true, ` + inTurnAnswer + `
)
SELECT * FROM u UNION ALL SELECT * FROM i`

// inTurnItem writes leaseAcquireInTurn's conditions and changes for an
// item q of leaseAcquireInTurnMany: its token for $2, its element for $5,
// and its proposed values for excluded's, a fence drawn only when granted.
var inTurnItem = strings.NewReplacer(freshFence, "nextval({{seqname}})", "$2", "q.token", "$5", "q.elem",
	"excluded.fence", "nextval({{seqname}})", "excluded.", "q.")
