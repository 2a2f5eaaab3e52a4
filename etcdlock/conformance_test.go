package etcdlock_test

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestConformance(t *testing.T) { conformance(t, etcdlock.MinTTL) }

// TestConformanceAboveWaitLease runs the suite with a TTL longer than the
// test server's wait lease (MinTTLFor(250 ms) = 2 s): waiters queue under
// the wait lease and move to the lease of the lock's TTL when granted.
func TestConformanceAboveWaitLease(t *testing.T) {
	// The run ledger is the same keys and code as in TestConformance,
	// which runs the cross-process skew test on it; here two slots check
	// RunOnce under these settings (make slots sets its own count).
	if os.Getenv(dlocktest.EnvSlots) == "" {
		t.Setenv(dlocktest.EnvSlots, "2")
	}
	conformance(t, 3*time.Second)
}

func conformance(t *testing.T, ttl time.Duration) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	dlocktest.Run(t, dlocktest.Harness{
		New:          func(t testing.TB) *dlock.Locker { return locker(t, srv.Endpoint) },
		URL:          srv.URL(),
		TTL:          ttl,
		Expire:       func(t testing.TB, name string) { expire(t, admin, name) },
		Steal:        func(t testing.TB, name string) { steal(t, admin, name) },
		NewStoppable: newStoppable,
		Provides: []dlocktest.Capability{dlocktest.Notifier, dlocktest.Queuer, dlocktest.BatchRefresher,
			dlocktest.BatchReleaser, dlocktest.Lister, dlocktest.ForceReleaser, dlocktest.EvictionWatcher,
			dlocktest.Diagnoser, dlocktest.Describer, dlocktest.SettingsReporter, dlocktest.Ledger, dlocktest.Adopter},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.SessionWatcher:    "a lease's loss is found by its keep-alive (the watchdog's refresh)",
			dlocktest.Migrator:          "no schema: keys are created as they are used",
			dlocktest.MigrationReporter: "no schema",
			dlocktest.LogSetter:         "the etcd client's log is off (zap.NewNop)",
		},
	})
}

func newStoppable(t testing.TB) (*dlock.Locker, func()) {
	srv := testserver.Etcd(t)
	return locker(t, srv.Endpoint), srv.Stop
}

// expire deletes the holder's key, as the driver does when a lock's own
// TTL has run out under a lease other locks still keep alive. (Revoking
// the shared lease ends every lock under it: TestSessionEnded.)
func expire(t testing.TB, cli *clientv3.Client, name string) {
	t.Helper()
	key, _ := head(t, cli, name)
	if _, err := cli.Delete(context.Background(), key); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// steal deletes the holder's key and puts a foreign contender in its place.
func steal(t testing.TB, cli *clientv3.Client, name string) {
	t.Helper()
	ctx := context.Background()
	key, _ := head(t, cli, name)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	foreign := etcdlock.DefaultPrefix + url.PathEscape(name) + "/0000000000000000000000000000f0e1"
	if _, err := cli.Txn(ctx).Then(clientv3.OpDelete(key), clientv3.OpPut(foreign, "thief", clientv3.WithLease(lease.ID))).Commit(); err != nil {
		t.Fatalf("steal: %v", err)
	}
}
