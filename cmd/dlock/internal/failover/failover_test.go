package failover_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/failover"
)

// shortConfig is the short run of make test: 20 clients, 100 cycles/s,
// one SIGKILL, the killed replica started again.
func shortConfig(t *testing.T, backend string, urls []string, replicas int) failover.Config {
	return failover.Config{
		Bin: dlockBin, Dir: t.TempDir(), Backend: backend, URLs: urls, Ports: ports(t, replicas),
		Clients: 20, Victims: 2, LoadRate: 100, LoadNames: 4,
		Steady: time.Second, Dwell: 500 * time.Millisecond,
	}
}

// play runs cfg and logs what it measured.
func play(t *testing.T, cfg failover.Config) failover.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := failover.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	return res
}

// TestFailover kills one replica of `dlock serve` under 20 held leases and
// a load of acquire/release cycles.
func TestFailover(t *testing.T) {
	t.Run("ReplicasKeepEveryLease", func(t *testing.T) {
		if !supportsLeaseKeyFile(t) {
			t.Skip("this dlock serve has no --lease-key-file: its replicas cannot serve each other's leases yet")
		}
		cfg := shortConfig(t, "redis", []string{backendURL(t, "redis")}, 2)
		cfg.LeaseKeyFile = true
		res := play(t, cfg)
		if res.LeasesLost != 0 || res.DoubleGrants != 0 {
			t.Errorf("2 replicas, one killed: %d of %d leases lost (%v), %d double grants of %d grants; want none",
				res.LeasesLost, res.Clients, res.LostBy, res.DoubleGrants, res.Grants)
		}
	})
	t.Run("OneReplicaLosesItsLeases", func(t *testing.T) {
		res := play(t, shortConfig(t, "redis", []string{backendURL(t, "redis")}, 1))
		if res.LeasesLost == 0 || res.DoubleGrants != 0 {
			t.Errorf("1 replica, killed and started again: %d of %d leases lost, %d double grants; want losses and no double grant",
				res.LeasesLost, res.Clients, res.DoubleGrants)
		}
	})
	t.Run("SeparateBackendsDoubleGrant", func(t *testing.T) {
		urls := []string{backendURL(t, "redis"), backendURL(t, "redis")}
		cfg := shortConfig(t, "redis", urls, 2)
		cfg.Steady = 3 * time.Second // the workers share names across replicas only until the kill
		res := play(t, cfg)
		if res.DoubleGrants == 0 {
			t.Errorf("2 replicas on separate backends: no double grant in %d grants; the ledger must see them", res.Grants)
		}
	})
}
