// Package chaos is dlock's fault suite: each scenario (S1–S10) runs a
// fault against real servers started by internal/testing/testserver, many trials,
// and reports a verdict row per backend: trials, violations,
// unlinearizable histories, and the timings that matter for it.
//
// The scenarios live in this package's tests, one file each
// (s1_pause_test.go ... s10_clock_test.go); `go test ./chaos/` runs a short
// subset (a few trials each), and DLOCK_CHAOS=full (make chaos) runs at
// least 20 trials of each. The exported part is what the tests share and
// what other fault tests may reuse: the verdict Table, the grant History
// and its linearizability check (porcupine, against a lock model with
// fences and a fenced-register model), and percentiles.
//
// The checker gates the verdict. Every fenced path must show 0 violations
// and 0 unlinearizable histories; every negative control (the same fault
// without fencing, or with the unsafe setting) must reproduce its known
// violation at least once, with the checker refusing at least one of its
// histories, so that the table is known not to be blind. A row with a
// stated exemption (ExpectExempt) counts the trials its exemption explains
// apart and prints them as "EXEMPT n of N", never as PASS. A row's Expect
// says which rule it is judged by.
package chaos
