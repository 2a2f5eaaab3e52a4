package etcdlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

func findings(t *testing.T, drv driver.Driver) (map[string]driver.Finding, error) {
	t.Helper()
	fs, err := drv.(driver.Diagnoser).Diagnose(context.Background())
	m := map[string]driver.Finding{}
	for _, f := range fs {
		t.Logf("%-40s %-6s %s", f.Check, f.Verdict, f.Detail)
		m[f.Check] = f
	}
	return m, err
}

// TestDiagnose: a 3-member cluster with one member stopped shows that
// member unreached, the others reached with one leader, 3 members, and
// the TTL advice; a single member is flagged as a single point of
// failure; a frozen single member is an error naming it.
func TestDiagnose(t *testing.T) {
	c := testserver.EtcdCluster(t, 3)
	c.Members[2].Kill()
	defer c.Members[2].Start()
	drv := rawDriver(t, c.ElectionTimeout, c.Endpoints...)
	// If the killed member led, the others elect a new leader first.
	var m map[string]driver.Finding
	var err error
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m, err = findings(t, drv)
		if err == nil && m["etcd leader"].Verdict == driver.VerdictOK || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, mem := range c.Members {
		f, ok := m["etcd endpoint "+mem.Endpoint]
		want := driver.VerdictOK
		if i == 2 {
			want = driver.VerdictWarn
		}
		if !ok || f.Verdict != want {
			t.Errorf("endpoint %s: %+v, want verdict %s", mem.Endpoint, f, want)
		}
	}
	if f := m["etcd leader"]; f.Verdict != driver.VerdictOK {
		t.Errorf("leader: %+v", f)
	}
	if f := m["etcd cluster size"]; f.Verdict != driver.VerdictOK || !strings.Contains(f.Detail, "3 members") {
		t.Errorf("cluster size: %+v", f)
	}
	if f := m["etcd TTL vs election timeout"]; !strings.Contains(f.Detail, "8s") {
		t.Errorf("TTL advice: %+v", f)
	}

	srv := testserver.Etcd(t)
	drv = rawDriver(t, srv.ElectionTimeout, srv.Endpoint)
	m, err = findings(t, drv)
	if err != nil {
		t.Fatal(err)
	}
	if f := m["etcd cluster size"]; f.Verdict != driver.VerdictWarn {
		t.Errorf("single member: %+v, want a warning", f)
	}
	srv.Pause()
	defer srv.Resume()
	if _, err := findings(t, drv); err == nil || !strings.Contains(err.Error(), srv.Endpoint) {
		t.Errorf("frozen member: %v, want an error naming %s", err, srv.Endpoint)
	}
}
