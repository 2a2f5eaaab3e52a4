package dlockotel

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaks a goroutine (a Locker's
// watchdog, a backend client's).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
