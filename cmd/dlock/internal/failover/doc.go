// Package failover measures what clients of `dlock serve` lose when a
// replica dies: real `dlock serve` processes over one backend, real
// clients over HTTP, a SIGKILL and a rolling restart.
//
// Run starts Config.Replicas replicas of a dlock binary over one backend
// URL (each with the same --token-file, and the same --lease-key-file
// when Config.LeaseKeyFile is set), then:
//
//   - Config.Clients held-lease clients each take a lease on a name of
//     their own and follow it on its events stream. A client's stream
//     lives on one replica; when it breaks, the client turns at once to
//     the next replica of its address list, renews there
//     (POST /v1/leases/{id}/renew) and opens the stream there again.
//   - load workers run acquire/release cycles, Config.LoadRate per
//     second spread over the replicas, on a separate small set of
//     contended names, and write every grant into a Ledger that counts
//     double grants.
//   - the scenario: a steady state, a SIGKILL of one replica, a wait
//     until every client is streaming again or has lost its lease, then
//     (Config.RollingRestart) every replica restarted one by one (SIGTERM,
//     then started again on the same port with the same files), and a
//     final check of every long-held lease (GET /v1/leases/{id}).
//   - during the failover a few leases are force-released through the
//     admin API, and the time until their client hears "lost" is the
//     lost-push latency.
//
// A lease is lost when its client gets a "lost" event it did not cause,
// a "released" event it did not ask for, a 404 or 410 from a renew, an
// events request or the final check. The Ledger's rule for a double grant
// is in its doc comment.
//
// The results go to a JSON file (docs/failover.json) and from it, by
// Blocks, to a table in docs/serve.md; nothing in the table is typed by
// hand. Timing figures are reported, never asserted.
package failover
