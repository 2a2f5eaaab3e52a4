// Package chaos is dlock's fault suite: each scenario (S1–S10 of issue 10)
// runs a fault against real servers started by internal/testserver, many
// trials, and reports a verdict row per backend: trials, violations, and
// the timings that matter for it.
//
// The scenarios live in this package's tests, one file each
// (s1_pause_test.go ... s10_clock_test.go); `go test ./chaos/` runs a short
// subset (a few trials each), and DLOCK_CHAOS=full (make chaos) runs at
// least 20 trials of each. The exported part is what the tests share and
// what other fault tests may reuse: the verdict Table, the grant History
// and its linearizability check (porcupine, against a lock model with
// fences and a fenced-register model), and percentiles.
//
// Every fenced path must show 0 violations; every negative control (the
// same fault without fencing, or with the unsafe setting) must reproduce
// its known violation at least once, so that the table is known not to be
// blind. A row's Expect says which of the two it is.
package chaos
