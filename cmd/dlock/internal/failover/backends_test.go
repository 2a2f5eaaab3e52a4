package failover_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// backends are the backends of the full run, in the table's order.
var backends = []string{"redis", "postgres", "etcd", "file"}

// backendURL starts the named backend for t and returns the URL every
// replica serves: a fresh Redis, a fresh PostgreSQL database in lease
// mode (migrated), a fresh etcd, or a SQLite file the replicas share.
func backendURL(t *testing.T, name string) string {
	t.Helper()
	switch name {
	case "redis":
		return testserver.Redis(t).URL()
	case "postgres":
		url := testserver.Postgres(t).NewDatabase(t) + "&mode=lease"
		migrate(t, url)
		return url
	case "etcd":
		return testserver.Etcd(t).URL()
	case "file":
		return "file://" + filepath.Join(t.TempDir(), "locks.db")
	}
	t.Fatalf("no backend %q: want one of %v", name, backends)
	return ""
}

// migrate creates the backend's schema with `dlock migrate`.
func migrate(t *testing.T, url string) {
	t.Helper()
	out, err := exec.Command(dlockBin, "migrate", "--url", url).CombinedOutput()
	if err != nil {
		t.Fatalf("dlock migrate: %v\n%s", err, out)
	}
}

// supportsLeaseKeyFile reports whether the binary's `dlock serve` takes
// --lease-key-file (its --help lists the flag).
func supportsLeaseKeyFile(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command(dlockBin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("dlock serve --help: %v\n%s", err, out)
	}
	return strings.Contains(string(out), "--lease-key-file")
}

// ports returns n free loopback ports.
func ports(t *testing.T, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = testserver.FreePort(t)
	}
	return out
}
