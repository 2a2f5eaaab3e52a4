package failover_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/failover"
	"github.com/dlockdev/dlock/internal/docblock"
)

// Environment variables of the make targets: envFull=1 makes
// TestFailoverFull measure (make failover), envRender=1 makes
// TestFailoverDocsCurrent rewrite the table from the committed results
// instead of checking it (make failover-render).
const (
	envFull   = "DLOCK_FAILOVER"
	envRender = "DLOCK_FAILOVER_RENDER"
)

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..", "..", "..")

// fullConfig is a run of make failover: 200 clients, 1,000 cycles/s, one
// replica SIGKILLed, then every replica restarted one by one.
func fullConfig(t *testing.T, backend string, replicas int, keyFile bool) failover.Config {
	return failover.Config{
		Bin: dlockBin, Dir: t.TempDir(), Backend: backend, URLs: []string{backendURL(t, backend)},
		Ports: ports(t, replicas), LeaseKeyFile: keyFile,
		Clients: 200, Victims: 6, LoadRate: 1000, LoadNames: 32,
		Steady: 5 * time.Second, Dwell: 3 * time.Second, RollingRestart: true,
	}
}

// TestFailoverFull is make failover: every backend with 3 replicas, and
// with 1 with and without lease keys, written to docs/failover.json and rendered into docs/serve.md.
// It measures only with DLOCK_FAILOVER=1, and asserts nothing of the
// figures: a run that cannot be played fails it.
func TestFailoverFull(t *testing.T) {
	if os.Getenv(envFull) != "1" {
		t.Skipf("the full failover run measures for minutes: make failover (%s=1) runs it", envFull)
	}
	keyFile := supportsLeaseKeyFile(t)
	if !keyFile {
		t.Logf("this dlock serve has no --lease-key-file: each replica serves only its own leases")
	}
	rep := &failover.Report{Measured: time.Now().UTC().Format(time.DateOnly),
		Machine: fmt.Sprintf("%d cores (%s/%s)", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)}
	// Three replicas with shared lease keys; one server with them (its
	// own restart costs nothing); and one without, as a single server ran
	// before replicas: every restart loses every lease.
	shapes := []struct {
		replicas int
		keyFile  bool
	}{{3, keyFile}, {1, false}}
	if keyFile {
		shapes = append(shapes[:1], append([]struct {
			replicas int
			keyFile  bool
		}{{1, true}}, shapes[1:]...)...)
	}
	for _, backend := range backends {
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%s/%d/keys=%v", backend, sh.replicas, sh.keyFile), func(t *testing.T) {
				res := play(t, fullConfig(t, backend, sh.replicas, sh.keyFile))
				rep.Runs = append(rep.Runs, res)
			})
		}
	}
	if t.Failed() {
		return
	}
	if err := rep.Write(filepath.Join(root, failover.ResultsFile)); err != nil {
		t.Fatal(err)
	}
	if err := docblock.Update(failover.Blocks(root, rep)); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverDocsCurrent: the failover table in docs/serve.md is what the
// committed docs/failover.json renders now. A figure typed by hand, or
// left behind by a new results file, fails it.
func TestFailoverDocsCurrent(t *testing.T) {
	rep, err := failover.ReadReport(filepath.Join(root, failover.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	docblock.Verify(t, failover.Blocks(root, rep), "failover-", os.Getenv(envRender) == "1",
		"make failover-render (or make failover to measure anew)")
}
