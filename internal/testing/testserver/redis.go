package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a redis-server process on a free loopback port, stopped in
// t.Cleanup. Unless the args say otherwise it runs without persistence
// (--save "" --appendonly no), so Restart starts it empty.
type RedisServer struct {
	// Addr is host:port, e.g. "127.0.0.1:41234".
	Addr string
	// Port is the TCP port of Addr.
	Port int
	// Dir is the server's working directory (dump and AOF files).
	Dir string

	t    testing.TB
	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// clusterBusOffset is where Redis Cluster's bus listens: port+10000.
const clusterBusOffset = 10000

// Redis starts a redis-server with extra command-line args (for example
// "--replicaof", "127.0.0.1 6379", or "--appendonly", "yes").
func Redis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin := Binary(t, "redis-server")
	port := 0
	if slices.Contains(args, "--cluster-enabled") {
		port = FreePortPair(t, clusterBusOffset) // the cluster bus listens on port+10000
	} else {
		port = FreePort(t)
	}
	s := &RedisServer{
		Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, Dir: t.TempDir(),
		t: t, bin: bin, args: args,
	}
	s.start()
	t.Cleanup(s.cleanup)
	return s
}

// URL returns "redis://127.0.0.1:port".
func (s *RedisServer) URL() string { return "redis://" + s.Addr }

func (s *RedisServer) argv() []string {
	argv := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir}
	if !slices.Contains(s.args, "--save") {
		argv = append(argv, "--save", "")
	}
	if !slices.Contains(s.args, "--appendonly") {
		argv = append(argv, "--appendonly", "no")
	}
	return append(argv, s.args...)
}

func (s *RedisServer) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.argv()...)
	cmd.Dir = s.Dir
	log, err := os.OpenFile(s.Dir+"/redis.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("redis log: %v", err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := waitDial(s.Addr, 10*time.Second); err != nil {
		s.Kill()
		s.t.Fatalf("redis-server: %v (log: %s)", err, s.Dir+"/redis.log")
	}
}

// signal sends sig to the running process and, when wait is set, waits for
// it to exit. It is a no-op when the server is not running.
func (s *RedisServer) signal(sig syscall.Signal, wait bool) {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	if wait {
		s.cmd = nil
	}
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if wait {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server cannot exit
		<-exited
	}
}

// Stop shuts the server down (SIGTERM) and waits for it to exit.
func (s *RedisServer) Stop() { s.signal(syscall.SIGTERM, true) }

// Kill ends the server with SIGKILL and waits for it to exit.
func (s *RedisServer) Kill() { s.signal(syscall.SIGKILL, true) }

// Pause freezes the server (SIGSTOP): connections stay open, nothing is
// answered, keys do not expire.
func (s *RedisServer) Pause() { s.signal(syscall.SIGSTOP, false) }

// Resume continues a paused server (SIGCONT).
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT, false) }

// Restart stops the server and starts it again on the same port and
// directory. Without persistence args it comes back empty.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

func (s *RedisServer) cleanup() { s.Kill() }
