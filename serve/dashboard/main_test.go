package dashboard_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaks a goroutine: the browser test
// starts a server, SSE streams and a chromedp browser connection, and all
// of them must be gone when it ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
