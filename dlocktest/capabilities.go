package dlocktest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/driver"
)

// Capability names an optional driver interface, which a Harness declares
// in Provides or Lacks.
type Capability string

// The optional driver interfaces. Without one, the portable layer falls
// back (Notifier, Queuer: polling), or refuses (Lister: ErrUnsupported
// for List, Inspect and the primitives), so a driver that stops
// implementing one — a changed signature is enough — would still pass a
// suite that merely skipped its tests: declared, it fails.
const (
	Notifier          Capability = "Notifier"          // release notifications
	Queuer            Capability = "Queuer"            // waiters queued in the backend
	BatchRefresher    Capability = "BatchRefresher"    // many refreshes in one call
	BatchReleaser     Capability = "BatchReleaser"     // many releases in one call
	Lister            Capability = "Lister"            // List and Inspect
	ForceReleaser     Capability = "ForceReleaser"     // ForceRelease
	EvictionWatcher   Capability = "EvictionWatcher"   // force-releases pushed to the holder
	SessionWatcher    Capability = "SessionWatcher"    // a session's end pushed to the holder
	Migrator          Capability = "Migrator"          // Migrate
	MigrationReporter Capability = "MigrationReporter" // Migrate, saying what it created
	Diagnoser         Capability = "Diagnoser"         // dlock doctor's checks
	Describer         Capability = "Describer"         // Capabilities: minimum TTL and such
	SettingsReporter  Capability = "SettingsReporter"  // the settings in force, by URL key
	LogSetter         Capability = "LogSetter"         // the Locker's logger
	Ledger            Capability = "Ledger"            // a run ledger for RunOnce
	Adopter           Capability = "Adopter"           // Resume: a lease granted to another Locker
)

// implements tells whether a driver implements each Capability.
var implements = map[Capability]func(driver.Driver) bool{
	Notifier:          is[driver.Notifier],
	Queuer:            is[driver.Queuer],
	BatchRefresher:    is[driver.BatchRefresher],
	BatchReleaser:     is[driver.BatchReleaser],
	Lister:            is[driver.Lister],
	ForceReleaser:     is[driver.ForceReleaser],
	EvictionWatcher:   is[driver.EvictionWatcher],
	SessionWatcher:    is[driver.SessionWatcher],
	Migrator:          is[driver.Migrator],
	MigrationReporter: is[driver.MigrationReporter],
	Diagnoser:         is[driver.Diagnoser],
	Describer:         is[driver.Describer],
	SettingsReporter:  is[driver.SettingsReporter],
	LogSetter:         is[driver.LogSetter],
	Ledger:            is[driver.Ledger],
	Adopter:           is[driver.Adopter],
}

func is[I any](d driver.Driver) bool {
	_, ok := d.(I)
	return ok
}

// testCapabilities checks the harness's declaration against the driver:
// every Capability is declared, provided or lacking (with its reason),
// and the driver implements exactly those it provides.
func (s *suite) testCapabilities(t *testing.T) {
	for _, e := range declarationErrors(s.locker(t).Driver(), s.h.Provides, s.h.Lacks) {
		t.Error(e)
	}
}

// declarationErrors lists what is wrong with a declaration of d's
// capabilities.
func declarationErrors(d driver.Driver, provides []Capability, lacks map[Capability]string) []string {
	var errs []string
	for _, c := range slices.Sorted(maps.Keys(implements)) {
		p := slices.Contains(provides, c)
		why, l := lacks[c]
		has := implements[c](d)
		switch {
		case p && l:
			errs = append(errs, fmt.Sprintf("Harness declares %s both provided and lacking", c))
		case !p && !l:
			errs = append(errs, fmt.Sprintf("Harness declares neither that the driver provides %s nor why it lacks it (the driver %s it)", c, map[bool]string{true: "implements", false: "does not implement"}[has]))
		case p && !has:
			errs = append(errs, fmt.Sprintf("the driver does not implement driver.%s, which its Harness declares (a changed method signature?): it would fall back silently", c))
		case l && has:
			errs = append(errs, fmt.Sprintf("the driver implements driver.%s, which its Harness declares lacking (%s)", c, why))
		case l && strings.TrimSpace(why) == "":
			errs = append(errs, fmt.Sprintf("Harness.Lacks[%s] gives no reason", c))
		}
	}
	for _, c := range provides {
		if implements[c] == nil {
			errs = append(errs, fmt.Sprintf("Harness.Provides names %q, which is not a Capability", c))
		}
	}
	return errs
}

// provides reports whether the harness declares c provided. A test that
// needs c skips with the declared reason otherwise (skipLacking); whether
// the driver really implements c is checked once, by Capabilities.
func (s *suite) provides(c Capability) bool { return slices.Contains(s.h.Provides, c) }

// skipLacking skips t, giving the reason the harness declared for lacking c.
func (s *suite) skipLacking(t *testing.T, c Capability) {
	t.Helper()
	t.Skipf("the driver lacks driver.%s: %s", c, s.h.Lacks[c])
}
