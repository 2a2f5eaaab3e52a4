package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Reexec is a driver package's TestMain for runnable Examples that need a
// server: in the test process it starts a server with start, re-executes
// the test binary (same flags) with envInner=1 and DLOCK_URL set to the
// server's URL, stops the server once the child has exited, and returns
// the child's exit code. The child, seeing envInner, runs the tests
// (dlocktest.Main, which checks for leaked goroutines and ends the
// process it runs in, so no clean-up could follow it there):
//
//	func TestMain(m *testing.M) {
//		if os.Getenv(envInner) != "" {
//			dlocktest.Main(m)
//		}
//		os.Exit(testserver.Reexec(envInner, func(tb testing.TB) string { return testserver.Etcd(tb).URL() }))
//	}
//
// Without the server binary (testserver skips) the
// child runs without DLOCK_URL and without the Examples.
func Reexec(envInner string, start func(testing.TB) string) int {
	tb := &mainTB{}
	defer tb.cleanup()
	args := os.Args[1:]
	env := append(os.Environ(), envInner+"=1")
	url, stop := tb.start(start)
	switch {
	case stop == nil:
		env = append(env, "DLOCK_URL="+url)
	case stop.skip:
		fmt.Fprintf(os.Stderr, "examples skipped: %s\n", stop.msg)
		args = append(args, "-test.skip=^Example")
	default:
		fmt.Fprintf(os.Stderr, "TestMain: %s\n", stop.msg)
		return 1
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "TestMain: run the tests: %v\n", err)
		return 1
	}
	return 0
}

// mainTB is the testing.TB that internal/testing/testserver needs, outside any
// test: it collects clean-ups, and turns Fatal and Skip into a panic that
// start recovers. The embedded TB is nil: a method testserver starts to
// use that mainTB lacks panics rather than misbehaving quietly.
type mainTB struct {
	testing.TB
	cleanups []func()
}

// stopped is why a server could not start.
type stopped struct {
	msg  string
	skip bool
}

func (tb *mainTB) start(f func(testing.TB) string) (url string, stop *stopped) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(stopped)
			if !ok {
				panic(r)
			}
			stop = &s
		}
	}()
	return f(tb), nil
}

func (tb *mainTB) cleanup() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
}

func (tb *mainTB) Helper()          {}
func (tb *mainTB) Name() string     { return "TestMain" }
func (tb *mainTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }
func (tb *mainTB) Fatal(args ...any) {
	panic(stopped{msg: fmt.Sprint(args...)})
}
func (tb *mainTB) Fatalf(format string, args ...any) {
	panic(stopped{msg: fmt.Sprintf(format, args...)})
}
func (tb *mainTB) Skipf(format string, args ...any) {
	panic(stopped{msg: fmt.Sprintf(format, args...), skip: true})
}
func (tb *mainTB) TempDir() string {
	dir, err := os.MkdirTemp("", "dlock-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
