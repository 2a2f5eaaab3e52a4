package dlocktest

import (
	"encoding/json"
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// envChild marks a child process of the suite; it holds the JSON-encoded
// childSpec that says what the child must do.
const envChild = "DLOCKTEST_CHILD"

// mainCalled records that the test binary routes TestMain through Main, so
// that re-executing it as a child runs a child role and not the tests.
var mainCalled bool

// Main is the TestMain of every driver test package that calls Run:
//
//	func TestMain(m *testing.M) { dlocktest.Main(m) }
//
// In a child process started by the suite (the test binary re-executed with
// the DLOCKTEST_CHILD environment variable set) it opens Harness.URL with
// dlock.Open, plays the requested role (hammer a counter, hold a lock until
// killed, take lock sets) and exits. Otherwise it runs the tests and then
// fails the binary if any goroutine leaked (go.uber.org/goleak). m is the
// TestMain's *testing.M, or a wrapper of it that runs it.
func Main(m interface{ Run() int }) {
	if raw := os.Getenv(envChild); raw != "" {
		os.Exit(childMain(raw))
	}
	mainCalled = true
	goleak.VerifyTestMain(m)
}

func childMain(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "dlocktest child: bad %s: %v\n", envChild, err)
		return 2
	}
	if err := spec.run(); err != nil {
		fmt.Fprintf(os.Stderr, "dlocktest child %s: %v\n", spec.Role, err)
		return 1
	}
	fmt.Println(childOK)
	return 0
}
