package failover

import (
	"fmt"
	"time"
)

// Config is one run: which binary, which backend, how many replicas and
// clients, and how long each phase lasts.
type Config struct {
	// Bin is the dlock binary the replicas run.
	Bin string
	// Dir is a directory for the token and key files and the replicas' logs.
	Dir string
	// Backend names the backend in the results ("redis", "postgres", ...).
	Backend string
	// URLs is the backend URL every replica serves (one URL), or one URL
	// per replica: replicas on separate backends do not share their locks,
	// which is how a test shows that the ledger sees double grants.
	URLs []string
	// Ports are the replicas' ports on 127.0.0.1, one per replica; the
	// number of replicas is len(Ports).
	Ports []int
	// LeaseKeyFile passes --lease-key-file to every replica (a binary
	// without that flag refuses to start with it).
	LeaseKeyFile bool

	// Clients is the number of held-lease clients, each on its own name.
	Clients int
	// HeldTTL is the TTL of the held leases (default 10 s).
	HeldTTL time.Duration
	// Victims is how many held leases are force-released during the
	// failover, to time the lost push (default 4).
	Victims int

	// LoadRate is the acquire/release cycles per second, all replicas
	// together (0: no load).
	LoadRate int
	// LoadNames is the number of contended names the load shares (default 16).
	LoadNames int
	// LoadTTL is the TTL of the load's leases (default 5 s).
	LoadTTL time.Duration
	// LoadWait is the wait_ms of the load's acquires (default 1 s).
	LoadWait time.Duration

	// Steady is how long the run goes before the SIGKILL (default 2 s),
	// and Dwell how long it goes on after each step once every client is
	// streaming again or has lost its lease (default 1 s).
	Steady, Dwell time.Duration
	// Settle bounds the wait for every client to be streaming again or
	// lost, after a step (default 60 s): past it the run goes on and the
	// clients still away count as lost.
	Settle time.Duration
	// RollingRestart restarts every replica one by one after the kill
	// (SIGTERM, then start); otherwise only the killed one is started again.
	RollingRestart bool
}

// Replicas is the number of replicas of the run.
func (c Config) Replicas() int { return len(c.Ports) }

// url is the backend URL replica i serves.
func (c Config) url(i int) string {
	if len(c.URLs) == 1 {
		return c.URLs[0]
	}
	return c.URLs[i]
}

// withDefaults fills the zero durations and counts with their defaults.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeldTTL, 10*time.Second)
	def(&c.LoadTTL, 5*time.Second)
	def(&c.LoadWait, time.Second)
	def(&c.Steady, 2*time.Second)
	def(&c.Dwell, time.Second)
	def(&c.Settle, 60*time.Second)
	if c.Victims == 0 {
		c.Victims = 4
	}
	if c.LoadNames == 0 {
		c.LoadNames = 16
	}
	return c
}

// check refuses a config the run cannot follow, naming the bad value.
func (c Config) check() error {
	switch {
	case c.Bin == "" || c.Dir == "":
		return fmt.Errorf("failover: Config.Bin %q and Config.Dir %q are both required", c.Bin, c.Dir)
	case len(c.Ports) == 0:
		return fmt.Errorf("failover: no replica: Config.Ports is empty")
	case len(c.URLs) != 1 && len(c.URLs) != len(c.Ports):
		return fmt.Errorf("failover: %d backend URLs for %d replicas: want one, or one per replica", len(c.URLs), len(c.Ports))
	case c.Clients < 1:
		return fmt.Errorf("failover: Config.Clients %d: want at least 1", c.Clients)
	case c.Victims < 0 || c.Victims > c.Clients:
		return fmt.Errorf("failover: Config.Victims %d: want 0 to Clients (%d)", c.Victims, c.Clients)
	case c.LoadRate < 0:
		return fmt.Errorf("failover: Config.LoadRate %d: want 0 or more", c.LoadRate)
	case c.LoadNames < 1:
		return fmt.Errorf("failover: Config.LoadNames %d: want at least 1", c.LoadNames)
	}
	for _, d := range []time.Duration{c.HeldTTL, c.LoadTTL, c.LoadWait, c.Steady, c.Dwell, c.Settle} {
		if d < 0 {
			return fmt.Errorf("failover: a negative duration in the config: %s", d)
		}
	}
	return nil
}
