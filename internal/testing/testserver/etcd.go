package testserver

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// etcdStartTimeout bounds how long a member may take to accept clients.
const etcdStartTimeout = 30 * time.Second

// EtcdServer is one etcd member started from PATH (Debian: etcd-server) on
// free loopback ports. Stop and Start may be called any number of times;
// the member keeps its data directory and ports across them.
type EtcdServer struct {
	// Name is the member's name in its cluster (m0, m1, ...).
	Name string
	// Endpoint is the client address, host:port.
	Endpoint string
	// PeerURL is the member's raft address, http://host:port.
	PeerURL string
	// ElectionTimeout is the member's --election-timeout (its heartbeat
	// interval is a tenth of it).
	ElectionTimeout time.Duration

	t       testing.TB
	bin     string
	dataDir string
	logPath string
	cluster string // --initial-cluster value

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
}

// EtcdClusterServer is n etcd members on loopback that form one cluster.
type EtcdClusterServer struct {
	Members   []*EtcdServer
	Endpoints []string
	// ElectionTimeout is every member's --election-timeout.
	ElectionTimeout time.Duration
}

// SingleElectionTimeout is the election timeout of a single-member server
// (Etcd): a lone member never holds an election after it starts, so it
// may claim a short one, which lets tests use 2 s TTLs (see
// etcdlock.MinTTLFor).
const SingleElectionTimeout = 250 * time.Millisecond

// Etcd starts a single-member etcd server with SingleElectionTimeout,
// stopped in t.Cleanup.
func Etcd(t testing.TB) *EtcdServer {
	t.Helper()
	return etcdCluster(t, 1, SingleElectionTimeout).Members[0]
}

// EtcdCluster starts an n-member etcd cluster on loopback with etcd's
// default election timeout (1 s) and waits until every member accepts
// clients. Members are stopped in t.Cleanup.
func EtcdCluster(t testing.TB, n int) *EtcdClusterServer {
	t.Helper()
	return etcdCluster(t, n, time.Second)
}

func etcdCluster(t testing.TB, n int, election time.Duration) *EtcdClusterServer {
	t.Helper()
	if n < 1 {
		t.Fatalf("testserver: etcd cluster of %d members", n)
	}
	bin := Binary(t, "etcd")
	c := &EtcdClusterServer{ElectionTimeout: election}
	var initial []string
	for i := range n {
		m := &EtcdServer{
			Name:     fmt.Sprintf("m%d", i),
			Endpoint: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			PeerURL:  fmt.Sprintf("http://127.0.0.1:%d", FreePort(t)),
			t:        t, bin: bin, ElectionTimeout: election,
		}
		m.dataDir, m.logPath = etcdDirs(t)
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
		c.Endpoints = append(c.Endpoints, m.Endpoint)
	}
	for _, m := range c.Members {
		m.cluster = strings.Join(initial, ",")
		t.Cleanup(m.Stop)
		m.spawn()
	}
	for _, m := range c.Members {
		m.waitReady()
	}
	c.Members[0].waitHealthy()
	return c
}

// waitHealthy waits until the member reports itself healthy on its
// /health endpoint: it has a leader and serves requests. A member that
// accepts connections may still be electing one, on a loaded machine for
// longer than a client's dial timeout.
func (s *EtcdServer) waitHealthy() {
	s.t.Helper()
	deadline := time.Now().Add(etcdStartTimeout)
	client := &http.Client{Timeout: time.Second}
	var last string
	for time.Now().Before(deadline) {
		resp, err := client.Get("http://" + s.Endpoint + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return
			}
			last = string(body)
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("testserver: etcd cluster not healthy within %s: %s", etcdStartTimeout, last)
}

// URL returns the dlock URL of this member alone, with its election
// timeout: etcd://127.0.0.1:port?election_timeout=250ms.
func (s *EtcdServer) URL() string {
	return "etcd://" + s.Endpoint + "?election_timeout=" + s.ElectionTimeout.String()
}

// URL returns the dlock URL naming every member of the cluster, with its
// election timeout.
func (c *EtcdClusterServer) URL() string {
	return "etcd://" + strings.Join(c.Endpoints, ",") + "?election_timeout=" + c.ElectionTimeout.String()
}

// Start restarts a stopped member on the same ports and data directory,
// and waits until it accepts clients. It is a no-op while running.
func (s *EtcdServer) Start() {
	s.t.Helper()
	s.spawn()
	s.waitReady()
}

// waitReady fails the test, with the tail of the member's log, when the
// member does not accept clients in time.
func (s *EtcdServer) waitReady() {
	s.t.Helper()
	if err := waitDial(s.Endpoint, etcdStartTimeout); err != nil {
		log, _ := os.ReadFile(s.logPath)
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		s.t.Fatalf("testserver: etcd %s: %v\n%s", s.Name, err, log)
	}
}

// Stop stops the member gracefully (SIGTERM, then SIGKILL after 10 s) and
// waits for it to exit. It is a no-op when the member is not running.
func (s *EtcdServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-exited
	}
	_ = s.log.Close()
	s.cmd, s.log = nil, nil
}

func (s *EtcdServer) spawn() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatalf("testserver: etcd log: %v", err)
	}
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Stdout, cmd.Stderr = log, log
	if runtime.GOARCH != "amd64" {
		// etcd 3.4 refuses to start on other architectures without this.
		cmd.Env = append(os.Environ(), "ETCD_UNSUPPORTED_ARCH="+runtime.GOARCH)
	}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		s.t.Fatalf("testserver: start etcd: %v", err)
	}
	s.cmd, s.log = cmd, log
}

func (s *EtcdServer) args() []string {
	client := "http://" + s.Endpoint
	return []string{
		"--name", s.Name,
		"--data-dir", s.dataDir,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", s.PeerURL,
		"--initial-advertise-peer-urls", s.PeerURL,
		"--initial-cluster", s.cluster,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "dlock-test",
		"--election-timeout", strconv.Itoa(int(s.ElectionTimeout / time.Millisecond)),
		"--heartbeat-interval", strconv.Itoa(int(s.ElectionTimeout / 10 / time.Millisecond)),
		"--logger", "zap",
		"--log-outputs", "stderr",
		"--log-level", "warn",
	}
}

// etcdDirs makes a fresh directory for one member and returns its data
// directory and log file inside it. It is on tmpfs (/dev/shm) when the
// machine has one: etcd fsyncs its WAL on every write, and on a virtual
// disk that fsync, not the lock algorithm, would dominate every
// measurement. The directory is removed when t ends.
func etcdDirs(t testing.TB) (data, log string) {
	t.Helper()
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "dlock-etcd-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			base = dir
		}
	}
	if base == "" {
		base = t.TempDir()
	}
	return filepath.Join(base, "data"), filepath.Join(base, "etcd.log")
}
