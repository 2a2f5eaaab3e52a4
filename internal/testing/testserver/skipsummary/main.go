// Command skipsummary prints what a test run did not test because a
// server binary was missing, from the file internal/testing/testserver recorded
// the skips in (make test's DLOCK_TEST_SKIPS), and how to install them.
// It prints nothing when nothing was skipped.
//
//	go run ./internal/testserver/skipsummary FILE
package main

import (
	"fmt"
	"os"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: skipsummary FILE")
		os.Exit(2)
	}
	if err := testserver.Summary(os.Stdout, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "skipsummary:", err)
		os.Exit(1)
	}
}
