//go:build linux || darwin

package servebench

import (
	"fmt"
	"syscall"
)

// ensureFDs raises the soft limit on open files to need when it is lower
// and the hard limit allows; otherwise it says what to raise.
func ensureFDs(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= need {
		return nil // unknown: try anyway
	}
	if lim.Max < need {
		return fmt.Errorf("servebench: the streams need about %d open files; the limit is %d (hard %d): raise it (ulimit -n) or ask for fewer streams", need, lim.Cur, lim.Max)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("servebench: raise the open-file limit to %d: %w", need, err)
	}
	return nil
}
