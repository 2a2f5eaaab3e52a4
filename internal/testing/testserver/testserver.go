// Package testserver starts real backend servers (redis-server, PostgreSQL,
// etcd) from PATH on free loopback ports, in temporary directories, for
// tests. Each server is stopped in t.Cleanup.
//
// A missing binary skips the test, unless DLOCK_TEST_REQUIRE_SERVERS=1 (set
// by .ci/run), which turns it into a failure; a skip is recorded in the
// file DLOCK_TEST_SKIPS names, so that make test ends with what it did not
// test (Summary).
package testserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// EnvRequire names the variable that makes a missing server binary fail.
const EnvRequire = "DLOCK_TEST_REQUIRE_SERVERS"

// Binary finds name on PATH (or in the extra directories), skipping or
// failing t when it is missing.
func Binary(t testing.TB, name string, extraDirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range extraDirs {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s not found on PATH and %s=1", name, EnvRequire)
	}
	skipMissing(t, name, fmt.Sprintf("%s not found on PATH (set %s=1 to fail instead; %s installs it)", name, EnvRequire, InstallCommand))
	return ""
}

// Ports FreePort draws from: below Linux's default ephemeral range
// (32768-60999), from which the kernel picks the source port of every
// outgoing connection and of every bind to port 0. A port taken from that
// range was free a moment ago but may become a client socket's before the
// server binds it (seen in CI: an etcd peer port "already in use").
const (
	minFreePort = 20000
	maxFreePort = 32767
)

var (
	portsMu sync.Mutex
	handed  = map[int]bool{} // ports this process handed out: never twice
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// drawn at random from 20000-32767 (see minFreePort) and never one this
// process handed out before; after 100 draws that all failed, any port the
// kernel offers.
func FreePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		p := minFreePort + rand.N(maxFreePort-minFreePort+1)
		if handed[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		handed[p] = true
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	p := l.Addr().(*net.TCPAddr).Port
	handed[p] = true
	return p
}

// FreePortPair returns a free port p such that p+offset is free too, both
// below the kernel's ephemeral range and reserved for this process, for a
// server that listens on a second port derived from the first (Redis
// Cluster's bus: port+10000). Drawn from FreePort's range alone, the
// second port could land on another server's port or in the ephemeral
// range, where a client's source port can take it first.
func FreePortPair(t testing.TB, offset int) int {
	t.Helper()
	if offset <= 0 || offset > maxFreePort-minFreePort {
		t.Fatalf("FreePortPair: offset %d is outside [1, %d]", offset, maxFreePort-minFreePort)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := minFreePort + rand.N(maxFreePort-offset-minFreePort+1)
		if handed[p] || handed[p+offset] {
			continue
		}
		l1, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+offset))
		_ = l1.Close()
		if err != nil {
			continue
		}
		_ = l2.Close()
		handed[p], handed[p+offset] = true, true
		return p
	}
	t.Fatalf("FreePortPair: no free pair of ports %d apart in %d-%d", offset, minFreePort, maxFreePort)
	return 0
}

// WaitDial waits until addr accepts TCP connections, or fails t.
func WaitDial(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	if err := waitDial(addr, timeout); err != nil {
		t.Fatal(err)
	}
}

func waitDial(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server at %s did not accept connections within %s: %v", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
