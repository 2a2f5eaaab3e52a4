package redlock

import (
	"os"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// envInner marks the test binary as re-executed by TestMain, with
// DLOCK_URL naming the Examples' nodes.
const envInner = "DLOCK_REDLOCK_TEST_INNER"

// exampleNodes is how many redis-servers the Examples' URL lists.
const exampleNodes = 3

// TestMain starts the redis-servers that the Examples reach through
// DLOCK_URL (redlock://host1:port1,host2:port2,host3:port3), runs the
// tests and Examples in a child process (this test binary again, with the
// same flags) and stops the servers when the child has exited:
// dlocktest.Main, which checks for leaked goroutines, ends the process it
// runs in, so no clean-up could follow it there.
func TestMain(m *testing.M) {
	if os.Getenv(envInner) != "" {
		dlocktest.Main(m)
	}
	os.Exit(testserver.Reexec(envInner, exampleURL))
}

// exampleURL starts the Examples' nodes and returns their redlock:// URL.
func exampleURL(tb testing.TB) string {
	addrs := make([]string, exampleNodes)
	for i := range addrs {
		addrs[i] = testserver.Redis(tb).Addr
	}
	return Scheme + "://" + strings.Join(addrs, ",")
}
