//go:build unix

package benchwork

import (
	"syscall"
	"time"
)

// ProcessCPU is the user plus system CPU time this process has used so
// far; ok is false where the platform does not say.
func ProcessCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
