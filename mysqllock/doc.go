// Package mysqllock is the MySQL and MariaDB driver for dlock, in two
// modes: a lease table (the default) and GET_LOCK named locks.
//
//	db, _ := sql.Open("mysql", "app:secret@tcp(db:3306)/app")
//	locker, err := mysqllock.New(db)                                  // lease mode
//	locker, err := mysqllock.Config{Mode: mysqllock.GetLock}.Locker(db) // get_lock mode
//	err = locker.Migrate(ctx)                                         // once: creates the tables
//
// or, from a URL, dlock.Open(ctx, "mysql://app:secret@db:3306/app") with
// this package imported. The caller's *sql.DB is never closed by the
// Locker. Both modes share one schema, created by Migrate (or `dlock
// migrate --url …`), idempotently; without it every call fails at once
// with a *SchemaError naming the fix (a permanent error).
//
// # Lease mode
//
// One InnoDB row per name (name, token, owner, fence, expires_at). A
// grant is one message: one autocommitted UPDATE that gives the row to
// the token when it is free, expired by the database clock
// (UTC_TIMESTAMP(6)) or already the token's (a retried attempt), with the
// row's next fence, and a read of the row, which names the holder to a
// loser. The UPDATE carries the caller's deadline on the database clock
// and refuses past it, so an attempt that the server runs after its
// caller gave up (a stopped server resuming) grants nothing. Refresh and
// release are one token-checked UPDATE each. Fences are per name, kept in
// the row; released rows stay free for ten minutes and are then deleted,
// after the floor new rows start from is raised to their fences (so a
// name's fences still rise). MySQL has no LISTEN/NOTIFY, so waiters
// (driver.Queuer) wait in the server, first come first served, in
// GET_LOCK on the name's wake key, which every holder keeps while it
// holds the lease (a single attempt's on one of a few shared connections
// per Locker, a waiter's on the connection it waited on) and frees right after its release: the
// release hands the key to the first waiter, which takes the row. A
// waiter that dies leaves the queue with its connection; one that gave
// up, even a stopped process, stops waiting in the server at its
// deadline. A queued waiter checks the row when the holder's TTL runs
// out (and every second), and takes it without the key when it is free
// while a stopped process keeps the key.
//
// # Get_lock mode
//
// GET_LOCK on a connection taken from the pool and pinned for the life of
// the lease; Release calls RELEASE_LOCK and returns the connection.
// Waiters block in the server, in GET_LOCK bounded by the caller's
// deadline, so a waiter that gave up (even a stopped process) never gets
// the lock after. While a Locker holds locks, one goroutine asks every
// 100 ms, in one statement, whether each held key is still taken by its
// connection (IS_USED_LOCK), and ends at once the leases whose
// connection lost it. It cannot adopt: the lock is the connection's.
//
// # URLs
//
//	mysql://user:password@host:port/database?mode=lease|get_lock&table=dlock_leases
//
// mariadb:// is the same. The database is required; the port defaults to
// 3306. mode and table are this package's keys; every other query key is
// a go-sql-driver/mysql DSN parameter (tls, timeout, charset, …), and one
// it does not know is sent to the server as a session variable, which
// refuses a name it does not know. A repeated key, a ';' in a pair or a
// bad value is an error naming it; a password never appears in an error.
//
// # Fencing tokens
//
// One counter row ({table}_fences), bumped with UPDATE … SET v =
// LAST_INSERT_ID(v + 1) in the granting transaction: strictly increasing
// per name and across names, durable with the grant, and the same on
// MariaDB and MySQL 8 (which has no SEQUENCE). ForceRelease draws a fence
// too and writes it on the freed row.
//
// # Guarantees
//
// Lease mode is a correctness lock with fencing while the server keeps
// its commits: with innodb_flush_log_at_trx_commit other than 1 a crash
// can lose the last grants and hand their fences out again. An
// asynchronous replica promoted after a failover can re-grant a lease.
// The TTL is by the database clock, never the client's.
package mysqllock
