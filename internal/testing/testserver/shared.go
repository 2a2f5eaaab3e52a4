package testserver

import (
	"sync"
	"testing"
)

// sharedServer is the one server of a kind that a test binary shares
// between tests: starting it costs seconds, a fresh database on it
// milliseconds. It starts with the first test that asks and stops when
// the last test using it has finished (its t.Cleanup), so tests that need
// it concurrently (subtests, t.Parallel) share one process.
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

// release drops one test's use of srv, stopping it after the last.
func (sh *sharedServer[S]) release(srv *S) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.srv != srv {
		return
	}
	if sh.refs--; sh.refs == 0 {
		sh.stop(srv)
		sh.srv = nil
	}
}
