// Package redisfence applies the fencing rule of package fence in Redis:
// a Lua script writes a value only if its fence is not lower than the
// fence stored beside it, atomically.
//
//	g := redisfence.New(client) // any go-redis v9 client (UniversalClient)
//	err := g.Set(ctx, "report:daily", lease.Fence(), payload)
//	if errors.Is(err, fence.ErrStale) { ... } // a newer grant has written
//
// The fence of key K lives at FenceKey(K), in the same Redis Cluster hash
// slot: "K:fence" when K already has a hash tag ("{acct:1}:balance"), and
// "{K}:fence" otherwise (a key without a tag hashes as its whole name,
// which is what the tag "{K}" hashes to).
//
// # Fencing tokens
//
// Equal fences are accepted: one grant may write many times. Fences are
// compared exactly as decimal strings, so the full uint64 range works.
//
// # Guarantees
//
// The check and the write are one script, atomic on the node that owns the
// slot. Redis replication is asynchronous: after a failover the new
// primary may have lost the latest fence it had acknowledged, and a stale
// writer could then pass. For a correctness guarantee that survives
// failover, fence a store with synchronous durability (pgfence), or run
// Redis with WAIT/AOF settings you have reasoned about.
package redisfence
