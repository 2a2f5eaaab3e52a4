package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// RunWithCommand is the TestMain of a package that tests a command as a
// separate process: it builds the Go package pkg (e.g.
// "github.com/dlockdev/dlock/cmd/dlock") once into a temporary directory,
// sets *bin to the binary's path, runs m, removes the binary, and fails a
// passing run on leaked goroutines. It returns the exit code.
func RunWithCommand(m *testing.M, pkg string, bin *string) int {
	dir, err := os.MkdirTemp("", "dlock-command-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.Command("go", "build", "-o", *bin, pkg).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
		return 1
	}
	code := KeepShared(m).Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	return code
}
