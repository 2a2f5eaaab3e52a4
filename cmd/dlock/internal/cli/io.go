package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// IO is where a command reads and writes; tests give it buffers.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// OutTTY and ErrTTY say whether Out and Err are terminals: tables and
	// the in-place waiting status are only for terminals.
	OutTTY bool
	ErrTTY bool
}

// SystemIO returns the process's standard streams.
func SystemIO() *IO {
	return &IO{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		OutTTY: isTerminal(os.Stdout), ErrTTY: isTerminal(os.Stderr),
	}
}

// isTerminal reports whether f is a terminal (a tcgetattr succeeds; a
// character device such as /dev/null is not enough).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
