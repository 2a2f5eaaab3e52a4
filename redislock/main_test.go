package redislock_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// envInner marks the test binary as re-executed by TestMain, with
// DLOCK_URL naming the Examples' server.
const envInner = "DLOCK_REDISLOCK_TEST_INNER"

// TestMain plays a waiter child when a test started it as one (see
// startWaiterChild). Otherwise it starts the redis-server that the
// Examples reach through DLOCK_URL, runs the tests and Examples in a child
// process (this test binary again, with the same flags) and stops the
// server when the child has exited: dlocktest.Main, which checks for
// leaked goroutines, ends the process it runs in, so no clean-up could
// follow it there.
func TestMain(m *testing.M) {
	if spec := os.Getenv(envWaiterChild); spec != "" {
		if err := waiterChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "waiter child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envInner) != "" {
		dlocktest.Main(testserver.KeepShared(m))
	}
	os.Exit(testserver.Reexec(envInner, func(tb testing.TB) string { return testserver.Redis(tb).URL() }))
}
