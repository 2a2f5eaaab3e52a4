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
	glPublish   = `REPLACE INTO {{holders}} (conn_id, name, token, owner, fence) VALUES (?, ?, ?, ?, ?)`
	glUnpublish = `DELETE FROM {{holders}} WHERE conn_id = ?`
	// glHolder describes whoever holds key ? now: its connection, and its
	// row when it has published one.
	glHolder = `SELECT c.id, h.owner, h.fence FROM (SELECT IS_USED_LOCK(?) AS id) c
LEFT JOIN {{holders}} h ON h.conn_id = c.id`
	glList = `SELECT h.name, h.owner, h.fence, h.conn_id FROM {{holders}} h
WHERE IS_USED_LOCK(` + keySQL + `) = h.conn_id AND LEFT(h.name, LENGTH(?)) = ? ORDER BY h.name`
	glInspect = `SELECT h.owner, h.fence, h.conn_id FROM {{holders}} h
WHERE h.name = ? AND IS_USED_LOCK(` + keySQL + `) = h.conn_id`
)
