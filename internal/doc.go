// Package internal holds what the dlock module's users never import,
// sorted by who it serves, so that imports run one way: the command, then
// the library, then the drivers, then the driver contract.
//
//   - command/: the dlock command's own code — the CLI (cli), the
//     demos (demo), the job guard of dlock run (jobguard), and the
//     benchmarks (benchwork, baseline, servebench, benchreport, docblock).
//     Only cmd/dlock, and the benchmarks of the drivers' tests, import it.
//   - testing/: test support — real servers on free ports (testserver),
//     a clock a test can stall (clocktest), throwaway certificates
//     (testcert). Only tests import it.
//   - the rest is library plumbing that the drivers and the root package
//     share: spelling suggestions for bad input (suggest), a probe for
//     the protocol a port speaks (wireprobe), and the Redis drivers'
//     common scripts and key layout.
package internal
