package testserver

import (
	"sync"
	"testing"
)

// sharedServer is the one server of a kind that a test binary shares
// between tests: starting it costs seconds, a fresh database on it
// milliseconds. It starts with the first test that asks. Inside a run
// wrapped by KeepShared it stays up until the run ends, so that tests
// running one after another share one process; otherwise it stops when
// the last test using it has finished (its t.Cleanup), and tests that
// need it concurrently (subtests, t.Parallel) still share one process.
type sharedServer[S any] struct {
	mu    sync.Mutex
	srv   *S
	refs  int
	start func(testing.TB) *S // starts a detached server
	alive func(*S) bool       // false once the process has exited
	stop  func(*S)
}

// get returns the shared server, starting it if none runs.
func (sh *sharedServer[S]) get(t testing.TB) *S {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.srv == nil || !sh.alive(sh.srv) {
		sh.srv, sh.refs = sh.start(t), 0
	}
	srv := sh.srv
	sh.refs++
	t.Cleanup(func() { sh.release(srv) })
	return srv
}

// release drops one test's use of srv, stopping it after the last unless
// a KeepShared run keeps it.
func (sh *sharedServer[S]) release(srv *S) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.srv != srv {
		return
	}
	if sh.refs--; sh.refs == 0 && !keeping() {
		sh.stop(srv)
		sh.srv = nil
	}
}

// stopIdle stops the server if no test uses it.
func (sh *sharedServer[S]) stopIdle() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.srv != nil && sh.refs == 0 {
		sh.stop(sh.srv)
		sh.srv = nil
	}
}

// sharedServers are every kind of shared server, for KeepShared.
var sharedServers = []interface{ stopIdle() }{&pgShared, &mariadbShared}

var keep struct {
	sync.Mutex
	on bool
}

func keeping() bool {
	keep.Lock()
	defer keep.Unlock()
	return keep.on
}

// TestingM is what a TestMain runs: *testing.M, or a wrapper of it.
type TestingM interface{ Run() int }

// KeepShared wraps a test binary's m so that the shared servers
// (Postgres, MariaDB) started by its tests stay up from the first test
// that asks until the run ends, then stop: tests that run one after
// another share one server instead of starting one each (seconds each).
// A test that needs a server of its own, or one it may stop, uses
// NewPostgres or NewMariaDB as before.
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(testserver.KeepShared(m)) }
func KeepShared(m TestingM) TestingM { return keptRun{m} }

type keptRun struct{ m TestingM }

func (k keptRun) Run() int {
	keep.Lock()
	keep.on = true
	keep.Unlock()
	defer func() {
		keep.Lock()
		keep.on = false
		keep.Unlock()
		for _, sh := range sharedServers {
			sh.stopIdle()
		}
	}()
	return k.m.Run()
}
