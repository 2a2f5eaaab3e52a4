package memlock_test

import (
	"testing"

	"github.com/dlockdev/dlock/dlocktest"
)

func TestMain(m *testing.M) { dlocktest.Main(m) }
