package testserver

import (
	"syscall"
	"testing"
	"time"
)

// Kill crashes the server: SIGKILL to the postmaster and every backend
// (its process group), no shutdown, no checkpoint. The data directory is
// kept, so Restart brings the same cluster back after crash recovery.
func (s *PostgresServer) Kill() {
	cmd, exited := s.process()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Pause freezes the postmaster and every backend (SIGSTOP to the process
// group): connections stay open and nothing answers. Resume undoes it.
func (s *PostgresServer) Pause() { s.signalGroup(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT to the process group).
func (s *PostgresServer) Resume() { s.signalGroup(syscall.SIGCONT) }

func (s *PostgresServer) signalGroup(sig syscall.Signal) {
	if cmd, _ := s.process(); cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
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
