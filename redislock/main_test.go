package redislock_test

import (
	"os"
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testserver"
)

// envInner marks the test binary as re-executed by TestMain, with
// DLOCK_URL naming the Examples' server.
const envInner = "DLOCK_REDISLOCK_TEST_INNER"

// TestMain starts the redis-server that the Examples reach through
// DLOCK_URL, runs the tests and Examples in a child process (this test
// binary again, with the same flags) and stops the server when the child
// has exited: dlocktest.Main, which checks for leaked goroutines, ends the
// process it runs in, so no clean-up could follow it there.
func TestMain(m *testing.M) {
	if os.Getenv(envInner) != "" {
		dlocktest.Main(m)
	}
	os.Exit(testserver.Reexec(envInner, func(tb testing.TB) string { return testserver.Redis(tb).URL() }))
}
