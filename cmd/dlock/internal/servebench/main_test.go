package servebench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a run leaks a goroutine (stream readers,
// server connections, the leases' watchdog).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
