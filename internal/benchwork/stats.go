package benchwork

import (
	"slices"
	"time"
)

// Percentile is the p-th percentile of d by the nearest-rank method on
// the sorted values (index len*p/100, capped at the last): 0 when d is
// empty. d is not modified.
func Percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// Fairness is min(counts)/max(counts): 1 when every worker got the same
// share, 0 when one got none (or nobody got any).
func Fairness(counts []int) float64 {
	if len(counts) == 0 {
		return 0
	}
	hi := slices.Max(counts)
	if hi == 0 {
		return 0
	}
	return float64(slices.Min(counts)) / float64(hi)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
