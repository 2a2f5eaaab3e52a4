package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/backends"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// backend is one lock backend under test, reached by URL.
type backend struct {
	Name string
	URL  string
	// TTL is the lease length scenarios use on it (etcd: whole seconds,
	// at least 2).
	TTL time.Duration
	// Session is true for session-bound leases (Postgres advisory, MySQL
	// get_lock).
	Session bool
	// ExpiryTick is how late the server itself may end an expired lease:
	// etcd's lessor looks for expired leases every 500 ms (lease/lessor.go,
	// runLoop; not configurable), then revokes them through Raft.
	ExpiryTick time.Duration
}

const (
	shortTTL = 600 * time.Millisecond
	etcdTTL  = 2 * time.Second
	// etcdExpiryTick is etcd's lessor interval (see backend.ExpiryTick).
	etcdExpiryTick = 500 * time.Millisecond
)

func redisBackend(t *testing.T, srv *testserver.RedisServer) backend {
	return backend{Name: "redis", URL: srv.URL(), TTL: shortTTL}
}

// pgBackend migrates a fresh database and returns it in mode lease or
// advisory.
func pgBackend(t *testing.T, srv *testserver.PostgresServer, mode string) backend {
	t.Helper()
	b := backend{Name: "postgres (" + mode + ")", URL: srv.NewDatabase(t) + "&mode=" + mode, TTL: shortTTL, Session: mode == "advisory"}
	return migrated(t, b)
}

// mysqlBackend migrates a fresh database on a MariaDB server and returns
// it in mode lease or get_lock (session-bound: the lock is the
// connection's).
func mysqlBackend(t *testing.T, srv *testserver.MariaDBServer, mode string) backend {
	t.Helper()
	b := backend{Name: "mariadb (" + mode + ")", URL: srv.URL(srv.NewDatabase(t)) + "?mode=" + mode, TTL: shortTTL, Session: mode == "get_lock"}
	return migrated(t, b)
}

// mysqlBackends are both modes of mysqllock, each on its own fresh
// database of srv.
func mysqlBackends(t *testing.T, srv *testserver.MariaDBServer) []backend {
	return []backend{mysqlBackend(t, srv, "lease"), mysqlBackend(t, srv, "get_lock")}
}

// migrated creates b's schema and returns b.
func migrated(t *testing.T, b backend) backend {
	t.Helper()
	l := openLocker(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Migrate(ctx); err != nil {
		t.Fatalf("migrate %s: %v", b.Name, err)
	}
	return b
}

func etcdBackend(t *testing.T, url string) backend {
	return backend{Name: "etcd", URL: url, TTL: etcdTTL, ExpiryTick: etcdExpiryTick}
}

func fileBackend(t *testing.T) backend {
	return backend{Name: "file", URL: "file://" + filepath.Join(t.TempDir(), "dlock.db"), TTL: shortTTL}
}

// allBackends starts one server of each kind (Postgres is the shared one)
// and returns the backends in a fixed order.
func allBackends(t *testing.T) []backend {
	t.Helper()
	pg := testserver.Postgres(t)
	return []backend{
		redisBackend(t, testserver.Redis(t)),
		pgBackend(t, pg, "lease"),
		pgBackend(t, pg, "advisory"),
		etcdBackend(t, testserver.Etcd(t).URL()),
		fileBackend(t),
	}
}

// openLocker opens b's URL with opts; the Locker is closed when t ends.
func openLocker(t testing.TB, b backend, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := dlock.Open(ctx, b.URL, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", b.Name, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// lockName is a fresh lock name per trial, so that trials do not see each
// other's state.
func lockName(scenario string, trial int) string {
	return fmt.Sprintf("chaos-%s-%d-%d", scenario, trial, time.Now().UnixNano()%1_000_000)
}
