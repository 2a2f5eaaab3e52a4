package mysqllock

import (
	"crypto/sha256"
	"encoding/hex"
)

// Key is the GET_LOCK name of a dlock name in get_lock mode: "dlock:"
// and the first 40 hex digits of its SHA-256 (46 characters: MySQL's
// limit is 64). keySQL computes the same in SQL, for the holders table.
func Key(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "dlock:" + hex.EncodeToString(sum[:])[:40]
}

const keySQL = `CONCAT('dlock:', LEFT(SHA2(h.name, 256), 40))`

// Get_lock-mode statements.
const (
	glTry     = `SELECT GET_LOCK(?, ?), CONNECTION_ID()`
	glRelease = `SELECT RELEASE_LOCK(?)`
	glMine    = `SELECT IS_USED_LOCK(?) <=> CONNECTION_ID()`
	// glPublish records the grant in the holders table, one row per
	// connection (a stale row of an ended connection is ignored: a
	// holder counts only while IS_USED_LOCK names its connection).
	glPublish = `REPLACE INTO {{holders}} (conn_id, name, token, owner, fence) VALUES (?, ?, ?, ?, ?)`
	// glHolder describes whoever holds key ? now: its connection, and its
	// row when it has published one.
	glHolder = `SELECT c.id, h.owner, h.fence FROM (SELECT IS_USED_LOCK(?) AS id) c
LEFT JOIN {{holders}} h ON h.conn_id = c.id`
	glList = `SELECT h.name, h.owner, h.fence, h.conn_id FROM {{holders}} h
WHERE IS_USED_LOCK(` + keySQL + `) = h.conn_id AND LEFT(h.name, LENGTH(?)) = ? ORDER BY h.name`
	glInspect = `SELECT h.owner, h.fence, h.conn_id FROM {{holders}} h
WHERE h.name = ? AND IS_USED_LOCK(` + keySQL + `) = h.conn_id`
)

// glTrySeq is a grant and its fence in one statement, on MariaDB: the
// next value of the fence sequence when GET_LOCK took the key (drawn
// while the key is held: strictly increasing per name), else 0.
const glTrySeq = `SELECT IF(GET_LOCK(?, ?) = 1, NEXTVAL({{seq}}), 0), CONNECTION_ID()`

// glTryOne is a no-wait grant on MariaDB in one statement that returns
// no row: the holder row is written only when GET_LOCK took the key, with
// the fence drawn from the sequence while the key is held, and the fence
// comes back as the statement's insert id (LAST_INSERT_ID(expr)); no
// row written means the key was not taken. It waits for nothing: a
// GET_LOCK that waited here would keep the holders table open in a
// write for the whole wait. Its connection's id, which the monitor
// compares IS_USED_LOCK with, is asked later (glWhoAmI), by the monitor,
// for a lock held until its first tick; a lock released sooner never
// needs it.
const glTryOne = `REPLACE INTO {{holders}} (conn_id, name, token, owner, fence)
SELECT CONNECTION_ID(), ?, ?, ?, LAST_INSERT_ID(NEXTVAL({{seq}})) FROM DUAL WHERE GET_LOCK(?, 0) = 1`

// glWhoAmI is a session connection's id, and whether it holds key ?.
const glWhoAmI = `SELECT CONNECTION_ID(), IS_USED_LOCK(?) <=> CONNECTION_ID()`

// glNextFence draws a fence from the sequence (a force-release's).
const glNextFence = `SELECT NEXTVAL({{seq}})`

// glPublishSeq writes the holder row of the grant glTrySeq made (its
// fence is the session's last value of the sequence), when there was
// one; it follows glTrySeq in the same message on a pool that batches.
// Rows are not deleted at release: a row counts only while its
// connection holds its name's key (glList, glInspect), the connection's
// next grant replaces it, and the monitor deletes the rows that no longer
// count (glSweep). Between a grant's GET_LOCK and its REPLACE, within
// one message, the connection's row of an earlier grant of the same name
// still counts: an inspection at that instant names that grant's owner
// and fence (the one before, named by its connection, had no row at all).
const glPublishSeq = `REPLACE INTO {{holders}} (conn_id, name, token, owner, fence)
SELECT CONNECTION_ID(), ?, ?, ?, LASTVAL({{seq}}) FROM DUAL WHERE IS_USED_LOCK(?) <=> CONNECTION_ID()`

// glSweep deletes the holder rows whose connection no longer holds their
// name's key.
const glSweep = `DELETE FROM {{holders}} WHERE NOT (IS_USED_LOCK(CONCAT('dlock:', LEFT(SHA2(name, 256), 40))) <=> conn_id)`
