package dlock

import (
	"testing"

	"github.com/dlockdev/dlock/driver"
)

// TestHolderBackendKey: a holder read back from any backend key names
// that key again, and so does the holder an attempt on the key saw,
// whatever name the driver filled in. A wait watches and queues on the
// keys of the holders in its way, so a holder that named another key
// would leave the waiter subscribed to releases that never come, polling
// instead.
func TestHolderBackendKey(t *testing.T) {
	for _, k := range []string{
		"plain",
		key("jobs", KindPermit, 4, 0),
		key("jobs", KindPermit, 4, 3),
		key("jobs", KindQueue),
		key("catalog", KindRead, 63),
		key("catalog", KindWrite),
		key("scheduler", KindLeader),
	} {
		if got := holderFrom(driver.Holder{Name: k}).backendKey(); got != k {
			t.Errorf("holder of %q names key %q", k, got)
		}
		a := attempt{req: driver.Request{Name: k}}
		sg := a.blocked(driver.Holder{Name: "other", Owner: "o", TTL: -1}, sight{})
		if got := sg.held[0].backendKey(); len(sg.held) != 1 || got != k {
			t.Errorf("an attempt on %q waits for key %q", k, got)
		}
	}
}
