package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock"
)

// Exit codes of the dlock command. They are listed in `dlock --help` and
// chosen not to clash with the usual codes of the commands dlock runs.
const (
	// ExitOK: success.
	ExitOK = 0
	// ExitError: any other failure (backend unreachable, authentication
	// failed, ...).
	ExitError = 1
	// ExitUsage: bad flags or arguments, including a bad URL.
	ExitUsage = 2
	// ExitUnsafe: `dlock doctor` found the deployment unsafe.
	ExitUnsafe = 3
	// ExitHeld: the lock is held elsewhere (EX_TEMPFAIL); `dlock run`
	// lets --conflict-exit-code change it.
	ExitHeld = 75
	// ExitLeaseLost: `dlock run` lost its lease while the command ran and
	// terminated the command.
	ExitLeaseLost = 76
)

const exitCodesHelp = `Exit codes:
  0    success (dlock run, elect: the command's own exit code is passed through)
  1    error: backend unreachable, authentication failed, ...
  2    usage: bad flags or arguments, a bad URL (scheme, query key or value),
       name, TTL or wait (dlock without arguments prints help)
  3    dlock doctor: a check found the deployment unsafe
  75   the lock is held elsewhere (dlock run --conflict-exit-code changes it)
  76   dlock run: the lease was lost while the command ran; the command was
       sent SIGTERM (and SIGKILL after --grace). dlock elect campaigns again
       instead, and exits 76 only if the loss is found after the command
       ended by itself
  126  dlock run, elect: the command cannot be executed
  127  dlock run, elect: the command was not found
  128+N  dlock run, elect: the command was killed by signal N`

// exitError carries an exit code and an optional one-line message.
type exitError struct {
	code int
	err  error // nil: exit silently (the reason was already printed)
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exitWith returns an error that makes Main exit with code after printing
// err (if not nil) as one line.
func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

// usageErr reports bad flags or arguments (exit 2).
func usageErr(format string, args ...any) error {
	return exitWith(ExitUsage, fmt.Errorf(format, args...))
}

// codeOf maps an error returned by a command to an exit code. Bad input
// the library refused (dlock.ErrInvalidArgument: every bad URL — scheme,
// query key or value — and every bad name, TTL, wait or owner) is a usage
// error like a bad flag: the backend was never asked, and a retry cannot
// cure it.
func codeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, dlock.ErrInvalidArgument) {
		return ExitUsage
	}
	if err != nil {
		return ExitError
	}
	return ExitOK
}

// errorLine renders err as exactly one line starting with "dlock: ", or ""
// when there is nothing to say.
func errorLine(err error) string {
	var ee *exitError
	if errors.As(err, &ee) && ee.err == nil {
		return ""
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if !strings.HasPrefix(msg, "dlock: ") {
		msg = "dlock: " + msg
	}
	for strings.Contains(msg, "dlock: dlock: ") {
		msg = strings.ReplaceAll(msg, "dlock: dlock: ", "dlock: ")
	}
	return msg
}
