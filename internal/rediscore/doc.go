// Package rediscore holds what the two Redis lock drivers share: the
// single-node driver (redislock) and Redlock (redlock), which runs the
// same operations on each of its nodes.
//
//   - The key layout (Keys) and the lock value, "token\nfence\nowner"
//     (Value), which a lock taken by any version of either driver keeps.
//   - The token check (Mark, and held in held.lua, prepended to every
//     script that changes a lock only for its holder), and the scripts
//     both drivers run: Refresh, RefreshBatch, and the run ledger's
//     ClaimRun and FinishRun with its encoding (ledger.go). Each script is
//     an embedded .lua file; where the drivers differ, the caller passes
//     the difference (a Redlock token is "token/attempt", so its refresh
//     passes the mark "token/" where the single-node driver passes
//     "token\n").
//   - Batching script calls by Cluster hash slot in one pipeline (Group,
//     RunPipelined, Batch).
//   - The pub/sub multiplexer that wakes waiters on release (Mux): one
//     connection per client, a channel subscribed while someone waits on
//     it.
//   - What both do with go-redis itself: which error replies no retry can
//     cure (Classify), URL options go-redis would silently replace
//     (CheckOptions), and go-redis's log lines (SetLogger).
//
// Each driver keeps what is its own: redislock its fair queue (the
// acquire, release, dequeue scripts), redlock its quorum (phase 1 and 2
// of a fenced grant, the majority rule).
package rediscore
