package dlock_test

import (
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestMain fails the run if any test leaks a goroutine (watchdogs,
// waiters, subscriptions).
func TestMain(m *testing.M) { dlocktest.Main(testserver.KeepShared(m)) }
