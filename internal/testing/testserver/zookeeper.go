package testserver

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ZooKeeperJar is the Debian package's server jar (package zookeeper,
// 3.8); its manifest's Class-Path names the jars it needs.
const ZooKeeperJar = "/usr/share/java/zookeeper.jar"

// zkStartTimeout bounds how long a server may take to serve clients: a
// JVM starts slowly on a loaded machine, and an ensemble must elect.
const zkStartTimeout = 60 * time.Second

// ZooKeeper timing of the test servers. A tick of 250 ms makes session
// timeouts from ZKMinSessionTimeout to ZKMaxSessionTimeout legal and a
// leader election take about a second.
const (
	zkTick              = 250 * time.Millisecond
	ZKMinSessionTimeout = 500 * time.Millisecond
	ZKMaxSessionTimeout = 60 * time.Second
)

// ZooKeeperServer is one ZooKeeper server (QuorumPeerMain of the Debian
// package, run by java from PATH) on free loopback ports, with its data
// directory in a temporary directory. Stop, Kill and Start may be called
// any number of times; the server keeps its data and ports across them.
type ZooKeeperServer struct {
	// ID is the server's myid in its ensemble (1, 2, ...).
	ID int
	// Addr is the client address, 127.0.0.1:port.
	Addr string

	t       testing.TB
	java    string
	dir     string
	cfgPath string
	logPath string

	mu  sync.Mutex
	cmd *exec.Cmd
	log *os.File
}

// ZooKeeperEnsembleServer is n ZooKeeper servers forming one ensemble.
type ZooKeeperEnsembleServer struct {
	Servers []*ZooKeeperServer
	Addrs   []string
}

// ZooKeeper starts a standalone ZooKeeper server, stopped in t.Cleanup.
func ZooKeeper(t testing.TB) *ZooKeeperServer {
	t.Helper()
	return ZooKeeperEnsemble(t, 1).Servers[0]
}

// ZooKeeperEnsemble starts n ZooKeeper servers on loopback (standalone
// when n is 1) and waits until every one serves clients. They are stopped
// in t.Cleanup.
func ZooKeeperEnsemble(t testing.TB, n int) *ZooKeeperEnsembleServer {
	t.Helper()
	if n < 1 {
		t.Fatalf("testserver: zookeeper ensemble of %d servers", n)
	}
	java := Binary(t, "java")
	requireFile(t, ZooKeeperJar, "the Debian package zookeeper")
	e := &ZooKeeperEnsembleServer{}
	var peers []string
	for i := 1; i <= n; i++ {
		s := &ZooKeeperServer{ID: i, Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), t: t, java: java}
		s.dir = scratchDir(t, "dlock-zk-")
		s.cfgPath, s.logPath = filepath.Join(s.dir, "zoo.cfg"), filepath.Join(s.dir, "zookeeper.log")
		peers = append(peers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i, FreePort(t), FreePort(t)))
		e.Servers = append(e.Servers, s)
		e.Addrs = append(e.Addrs, s.Addr)
	}
	if n == 1 {
		peers = nil
	}
	for _, s := range e.Servers {
		s.configure(peers)
		t.Cleanup(s.Stop)
		s.spawn()
	}
	for _, s := range e.Servers {
		s.waitServing()
	}
	return e
}

// requireFile skips or fails t (see Binary) when path does not exist.
func requireFile(t testing.TB, path, from string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (from %s) not found and %s=1", path, from, EnvRequire)
	}
	skipMissing(t, path+" ("+from+")", fmt.Sprintf("%s (from %s) not found (set %s=1 to fail instead; %s installs it)", path, from, EnvRequire, InstallCommand))
}

// scratchDir makes a directory removed when t ends, on tmpfs when the
// machine has one: ZooKeeper fsyncs its transaction log on every write.
func scratchDir(t testing.TB, pattern string) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", pattern); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// configure writes the server's zoo.cfg (and myid in an ensemble).
func (s *ZooKeeperServer) configure(peers []string) {
	s.t.Helper()
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		s.t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	cfg := []string{
		fmt.Sprintf("tickTime=%d", zkTick.Milliseconds()),
		"initLimit=40",
		"syncLimit=8",
		fmt.Sprintf("minSessionTimeout=%d", ZKMinSessionTimeout.Milliseconds()),
		fmt.Sprintf("maxSessionTimeout=%d", ZKMaxSessionTimeout.Milliseconds()),
		"dataDir=" + data,
		"clientPort=" + port,
		"clientPortAddress=127.0.0.1",
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
	}
	cfg = append(cfg, peers...)
	if err := os.WriteFile(s.cfgPath, []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
	if len(peers) > 0 {
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", s.ID)), 0o600); err != nil {
			s.t.Fatal(err)
		}
	}
}

// URL returns the dlock URL of this server alone: zk://127.0.0.1:port.
func (s *ZooKeeperServer) URL() string { return "zk://" + s.Addr }

// URL returns the dlock URL naming every server of the ensemble.
func (e *ZooKeeperEnsembleServer) URL() string { return "zk://" + strings.Join(e.Addrs, ",") }

// Start restarts a stopped server on the same ports and data directory
// and waits until it serves clients. It is a no-op while running.
func (s *ZooKeeperServer) Start() {
	s.t.Helper()
	s.spawn()
	s.waitServing()
}

// StartNoWait restarts a stopped server without waiting for it to serve
// (a lone ensemble member cannot serve until a quorum is back).
func (s *ZooKeeperServer) StartNoWait() {
	s.t.Helper()
	s.spawn()
}

// Stop stops the server gracefully (SIGTERM, then SIGKILL after 10 s) and
// waits for it to exit. It is a no-op when the server is not running.
func (s *ZooKeeperServer) Stop() { s.end(syscall.SIGTERM, 10*time.Second) }

// Kill crashes the server (SIGKILL) and waits for it to exit.
func (s *ZooKeeperServer) Kill() { s.end(syscall.SIGKILL, 0) }

// Pause freezes the server (SIGSTOP): its connections stay open and it
// answers nothing. Resume undoes it.
func (s *ZooKeeperServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *ZooKeeperServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *ZooKeeperServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

func (s *ZooKeeperServer) end(sig syscall.Signal, grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused JVM cannot act on SIGTERM
	_ = s.cmd.Process.Signal(sig)
	exited := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-exited
	}
	_ = s.log.Close()
	s.cmd, s.log = nil, nil
}

func (s *ZooKeeperServer) spawn() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatalf("testserver: zookeeper log: %v", err)
	}
	cmd := exec.Command(s.java, s.javaArgs()...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		s.t.Fatalf("testserver: start zookeeper: %v", err)
	}
	s.cmd, s.log = cmd, log
}

// javaArgs starts QuorumPeerMain with a small heap and the quick-start
// JIT: the machine running the tests is small and shared.
func (s *ZooKeeperServer) javaArgs() []string {
	cp := "/etc/zookeeper/conf:" + ZooKeeperJar
	if _, err := os.Stat("/usr/share/java/slf4j-simple.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-simple.jar" // warnings to the log file
	}
	return []string{
		"-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dzookeeper.admin.enableServer=false",
		"-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath,
	}
}

// waitServing fails the test, with the tail of the server's log, when the
// server does not serve clients in time.
func (s *ZooKeeperServer) waitServing() {
	s.t.Helper()
	if err := s.WaitServing(zkStartTimeout); err != nil {
		s.t.Fatalf("testserver: zookeeper %d: %v\n%s", s.ID, err, s.LogTail(4000))
	}
}

// WaitServing waits until the server answers srvr with its mode
// (standalone, leader or follower), i.e. serves clients.
func (s *ZooKeeperServer) WaitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		mode, err := s.Mode()
		if err == nil && mode != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not serving clients at %s within %s (last: %v)", s.Addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Mode asks the server (four-letter word srvr) whether it is standalone,
// leader or follower; "" with a nil error when it runs but does not serve.
func (s *ZooKeeperServer) Mode() (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(mode), nil
		}
	}
	return "", sc.Err()
}

// LogTail returns the last n bytes of the server's log.
func (s *ZooKeeperServer) LogTail(n int) string {
	log, _ := os.ReadFile(s.logPath)
	if len(log) > n {
		log = log[len(log)-n:]
	}
	return string(log)
}

// Leader returns the ensemble's current leader, waiting up to timeout for
// one, or fails t.
func (e *ZooKeeperEnsembleServer) Leader(t testing.TB, timeout time.Duration) *ZooKeeperServer {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range e.Servers {
			if mode, err := s.Mode(); err == nil && (mode == "leader" || mode == "standalone") {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testserver: no zookeeper leader within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
