//go:build !unix

package benchwork

import "time"

// ProcessCPU is the user plus system CPU time this process has used so
// far; ok is false where the platform does not say (here).
func ProcessCPU() (cpu time.Duration, ok bool) { return 0, false }
