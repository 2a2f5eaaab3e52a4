// Package gocronlock runs the jobs of go-co-op/gocron v2 schedulers on
// several hosts through dlock, with gocron's two distributed interfaces:
//
//   - Locker, a gocron.Locker, runs each job once per slot of its
//     schedule across every scheduler that shares a dlock backend (each
//     keeps a run ledger beside its locks). gocron calls Lock before each
//     run with the job's name; Lock names the slot the run is due at
//     (dlock.SlotAt, so schedulers that fire a little apart name the same
//     slot), takes the lock of the job's name and claims the slot in the
//     ledger (Locker.ClaimSlot). A slot another scheduler claimed,
//     or a lock it holds, is an error, and gocron skips the run. Unlock
//     records the outcome (Locker.FinishRun) and releases the lock.
//   - Elector, a gocron.Elector, campaigns in a dlock election in the
//     background; only the scheduler whose Elector holds the term runs
//     jobs, and another takes over when its term ends.
//
// A lock alone, without slots, is not enough for gocron: a job shorter
// than the splay between two schedulers' firings runs on both, one after
// the other.
//
// This package is an example in its own module
// (github.com/dlockdev/dlock/examples/gocron), so that dlock itself does
// not depend on gocron; copy it, or depend on the example module.
package gocronlock
