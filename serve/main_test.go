package serve_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaks a goroutine (streams, the
// reaper, watchdogs).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
