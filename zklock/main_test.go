package zklock_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// envInner marks the test binary as re-executed by TestMain, with
// DLOCK_URL naming the Examples' server.
const envInner = "DLOCK_ZKLOCK_TEST_INNER"

// TestMain plays a pause child when the suite started it as one;
// otherwise it starts the ZooKeeper server that the Examples reach
// through DLOCK_URL and runs the tests and Examples in a child process
// (testserver.Reexec).
func TestMain(m *testing.M) {
	if spec := os.Getenv(envPauseChild); spec != "" {
		url, name, _ := strings.Cut(spec, " ")
		if err := pauseChild(url, name); err != nil {
			fmt.Fprintln(os.Stderr, "pause child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envInner) != "" {
		dlocktest.Main(m)
	}
	os.Exit(testserver.Reexec(envInner, func(tb testing.TB) string { return testserver.ZooKeeper(tb).URL() }))
}
