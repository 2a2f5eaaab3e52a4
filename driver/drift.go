package driver

import "time"

// ClockDrift is the margin subtracted from every expiry a client computes
// for a lease of ttl, for the difference in clock rates between the
// client and the backend: 1% of the TTL plus 2 ms, the Redlock paper's
// rule. The portable layer uses it for Lease.Expires; a driver that judges
// a grant's validity itself (Redlock) uses the same margin.
func ClockDrift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
