package metrics_test

import (
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaks a goroutine (watchdogs, waiters,
// Redis subscriptions).
func TestMain(m *testing.M) { goleak.VerifyTestMain(testserver.KeepShared(m)) }
