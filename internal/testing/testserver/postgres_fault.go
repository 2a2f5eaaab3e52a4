package testserver

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PostgreSQL's children call setsid(): each backend is in a session and
// process group of its own, so a signal to the postmaster's group reaches
// the postmaster only. The fault functions below therefore signal the
// postmaster and each of its children, found in /proc.

// Kill crashes the server: SIGKILL to the postmaster and every child (each
// stopped first, so that none acts between the kills), no shutdown, no
// checkpoint. The data directory is kept, so Restart brings the same
// cluster back after crash recovery.
func (s *PostgresServer) Kill() {
	cmd, exited := s.process()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pids := s.freeze()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	<-exited
	waitGone(pids, 10*time.Second)
}

// Pause freezes the postmaster and every backend (SIGSTOP): connections
// stay open and nothing answers. Resume undoes it.
func (s *PostgresServer) Pause() { s.freeze() }

// Resume continues a paused server (SIGCONT to the postmaster and every
// child).
func (s *PostgresServer) Resume() {
	cmd, _ := s.process()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pids := append(children(cmd.Process.Pid), cmd.Process.Pid)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// freeze stops the postmaster (so it forks no more), then its children,
// and returns them all, postmaster last.
func (s *PostgresServer) freeze() []int {
	cmd, _ := s.process()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	pm := cmd.Process.Pid
	_ = syscall.Kill(pm, syscall.SIGSTOP)
	kids := children(pm)
	for _, pid := range kids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	return append(kids, pm)
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces and parens.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
	}
	return kids
}

// waitGone waits until none of pids exists (or is a zombie), or timeout.
func waitGone(pids []int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil {
				break
			}
			rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
			if f := strings.Fields(rest); len(f) > 0 && f[0] == "Z" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Restart starts a killed server again on the same port and data
// directory and waits until it accepts connections (after crash recovery).
// It fails t when the server does not come back.
func (s *PostgresServer) Restart(t testing.TB) {
	t.Helper()
	if !s.stopped() {
		t.Fatalf("testserver: postgres restart while running; Kill it first")
	}
	if err := s.spawn(s.bin, s.cred); err != nil {
		t.Fatalf("testserver: restart postgres: %v", err)
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		t.Fatalf("testserver: restart postgres: %v", err)
	}
}

// PausePostmaster freezes the postmaster alone (SIGSTOP): running backends
// go on, but nothing new starts, and cancel requests, which the
// postmaster relays, wait. ResumePostmaster undoes it.
func (s *PostgresServer) PausePostmaster() { s.signalPostmaster(syscall.SIGSTOP) }

// ResumePostmaster continues a postmaster frozen by PausePostmaster.
func (s *PostgresServer) ResumePostmaster() { s.signalPostmaster(syscall.SIGCONT) }

func (s *PostgresServer) signalPostmaster(sig syscall.Signal) {
	if cmd, _ := s.process(); cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(cmd.Process.Pid, sig)
	}
}
