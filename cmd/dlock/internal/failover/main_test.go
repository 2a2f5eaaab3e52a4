package failover_test

import (
	"os"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// dlockBin is the dlock binary the replicas run, built once.
var dlockBin string

// TestMain builds cmd/dlock once and fails a passing run on leaked
// goroutines (testserver.RunWithCommand).
func TestMain(m *testing.M) {
	os.Exit(testserver.RunWithCommand(m, "github.com/dlockdev/dlock/cmd/dlock", &dlockBin))
}
