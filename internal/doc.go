// Package internal holds what the dlock module's users never import,
// sorted by who it serves, so that imports run one way. The dlock
// command's own code (CLI, demos, the job guard of dlock run, benchmark
// reports) is not here but under cmd/dlock/internal, which only the
// command imports.
//
//   - testing/: test support — real servers on free ports (testserver),
//     a clock a test can stall (clocktest), throwaway certificates
//     (testcert). Only tests import it.
//   - the rest is plumbing below the drivers, which the library, the
//     drivers and the command share: the Redis drivers' common scripts,
//     key layout and pub/sub (rediscore), the sending together of calls
//     many goroutines make at once (coalesce), the names a driver saw
//     contended lately (recent), spelling suggestions for bad input
//     (suggest), a probe for the protocol a port speaks
//     (wireprobe), the benchmark workloads that dlock bench and the
//     drivers' go test benchmarks both run (benchwork), and the writer of
//     the generated blocks in docs/ (docblock).
package internal
