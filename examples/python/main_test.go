package python_test

import (
	"testing"

	"github.com/dlockdev/dlock/examples/internal/exampletest"
)

// TestMain fails the run if a test leaks a goroutine (the server's
// watchdog, stream handlers).
func TestMain(m *testing.M) { exampletest.Main(m) }
