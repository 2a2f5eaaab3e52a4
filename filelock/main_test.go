package filelock_test

import (
	"os"
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(envChild); spec != "" {
		os.Exit(childMain(spec))
	}
	dlocktest.Main(m)
}
