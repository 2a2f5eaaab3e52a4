package dlocktest

import (
	"strings"
	"testing"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// hidden is a driver that lost its optional methods, as a changed
// signature would lose one: only driver.Driver's remain.
type hidden struct{ driver.Driver }

// TestDeclarationFailsWhenAnInterfaceGoesMissing: a driver declared to
// provide Notifier and Lister that no longer implements them fails the
// Capabilities subtest (instead of its waiters polling and its List tests
// skipping, with the suite green); so does an undeclared one.
func TestDeclarationFailsWhenAnInterfaceGoesMissing(t *testing.T) {
	d, err := memlock.Config{}.Driver(memlock.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	provides := []Capability{Notifier, BatchRefresher, Lister, ForceReleaser, EvictionWatcher, Ledger, Adopter}
	lacks := map[Capability]string{}
	for c := range implements {
		lacks[c] = "absent from memlock"
	}
	for _, c := range provides {
		delete(lacks, c)
	}
	if errs := declarationErrors(d, provides, lacks); len(errs) != 0 {
		t.Fatalf("memlock as declared: %q", errs)
	}
	errs := strings.Join(declarationErrors(hidden{d}, provides, lacks), "\n")
	for _, c := range provides {
		if !strings.Contains(errs, "does not implement driver."+string(c)) {
			t.Errorf("a driver that lost %s passes its declaration:\n%s", c, errs)
		}
	}
	delete(lacks, Queuer)
	if errs := strings.Join(declarationErrors(d, provides, lacks), "\n"); !strings.Contains(errs, "neither that the driver provides Queuer") {
		t.Errorf("an undeclared capability passes: %q", errs)
	}
}
