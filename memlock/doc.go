// Package memlock is dlock's in-process reference driver: locks live in a
// Go map guarded by a mutex, in a *Store shared by every Locker opened on
// it. It is meant for examples, for users' unit tests, and as the
// executable specification of what a driver must do; it protects nothing
// outside one process.
//
// # URLs
//
//	mem://NAME
//
// Every Open of the same NAME in one process shares one named Store (NAME
// may be empty). The portable query keys ttl, wait and owner are accepted;
// any other key is rejected. Named stores live as long as the process.
//
// # Fencing tokens
//
// Each name has a counter that is never deleted and is incremented by every
// grant and every ForceRelease, so fences strictly increase per name across
// release, expiry, takeover and force-release, for the life of the Store.
//
// # Guarantees
//
// Mutual exclusion is exact within one process: expiry is measured on the
// monotonic clock of the same process that asks, so there is no clock
// drift and no failover. A lease still expires when its holder stops
// refreshing (a goroutine stuck longer than the TTL), exactly as on a
// networked backend, which is what makes the driver useful for testing
// loss handling. Nothing survives the process.
package memlock
