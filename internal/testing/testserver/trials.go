package testserver

import (
	"os"
	"strconv"
)

// EnvTrials sets how many trials the tests that repeat a fault (a leader
// kill, a frozen server) run; each test has its own default.
const EnvTrials = "DLOCK_TEST_TRIALS"

// EnvLong, set to 1 by `make test-long`, makes the tests run their long
// forms: every demo scenario on every server backend, the controls whose
// counts are logged rather than asserted. `make test` runs the short
// forms.
const EnvLong = "DLOCK_TEST_LONG"

// Trials is the number of trials to run: EnvTrials when set to a
// positive number, else def.
func Trials(def int) int {
	if n, err := strconv.Atoi(os.Getenv(EnvTrials)); err == nil && n > 0 {
		return n
	}
	return def
}

// LongRun reports whether the long forms of the tests run (EnvLong=1).
func LongRun() bool { return os.Getenv(EnvLong) == "1" }
