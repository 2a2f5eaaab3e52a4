package dlocktest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	_ "github.com/dlockdev/dlock/memlock"
)

func TestMain(m *testing.M) { dlocktest.Main(m) }

// TestSuiteOnFlock runs the suite, child processes included, against a
// minimal flock-based driver, to test the suite's own machinery.
func TestSuiteOnFlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.json")
	url := flockScheme + "://" + path
	dlocktest.Run(t, dlocktest.Harness{
		New: func(t testing.TB) *dlock.Locker {
			l, err := dlock.Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		URL:    url,
		TTL:    time.Second, // flock is unfair: refreshes queue behind 32 pollers
		Expire: func(t testing.TB, name string) { (&flockDriver{path: path}).expire(name) },
		Steal:  func(t testing.TB, name string) { (&flockDriver{path: path}).steal(name) },
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			own := filepath.Join(t.TempDir(), "stoppable.json")
			l, err := dlock.Open(context.Background(), flockScheme+"://"+own)
			if err != nil {
				t.Fatal(err)
			}
			// "Stopping the server": the table becomes a directory, so
			// every operation fails as a transport error would.
			return l, func() { _ = os.Remove(own); _ = os.Mkdir(own, 0o700) }
		},
		Lacks: flockLacks(),
	})
}

// flockLacks declares every optional interface lacking: the flock driver
// is the smallest a driver can be, so that the suite's own machinery is
// tested on the required methods alone.
func flockLacks() map[dlocktest.Capability]string {
	m := map[dlocktest.Capability]string{}
	for _, c := range []dlocktest.Capability{
		dlocktest.Notifier, dlocktest.Queuer, dlocktest.BatchRefresher, dlocktest.BatchReleaser,
		dlocktest.Lister, dlocktest.ForceReleaser, dlocktest.EvictionWatcher, dlocktest.SessionWatcher,
		dlocktest.Migrator, dlocktest.MigrationReporter, dlocktest.Diagnoser, dlocktest.Describer,
		dlocktest.SettingsReporter, dlocktest.LogSetter, dlocktest.Ledger, dlocktest.Adopter,
	} {
		m[c] = "a minimal driver: the required methods only"
	}
	return m
}
