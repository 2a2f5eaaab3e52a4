package dlocktest

import (
	"strings"
	"testing"
)

// TestCheckSkips: a skip must name one of the suite's behaviours and say
// why; a mistyped name would otherwise skip nothing and pass unnoticed.
func TestCheckSkips(t *testing.T) {
	tests := (&suite{}).tests()
	for _, c := range []struct {
		skip map[string]string
		want string // "" for no error
	}{
		{nil, ""},
		{map[string]string{"RunOnce": "covered by the main run"}, ""},
		{map[string]string{"RunOnc": "covered by the main run"}, `names "RunOnc"`},
		{map[string]string{"Watchdog": ""}, `Skip["Watchdog"] gives no reason`},
	} {
		err := checkSkips(c.skip, tests)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.skip, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want an error with %q", c.skip, err, c.want)
		}
	}
}
