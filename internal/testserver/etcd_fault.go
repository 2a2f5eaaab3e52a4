package testserver

import "syscall"

// Kill crashes the member (SIGKILL) and waits for it to exit; Start brings
// it back on the same ports and data directory.
func (s *EtcdServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = s.log.Close()
	s.cmd, s.log = nil, nil
}

// Pause freezes the member (SIGSTOP): its connections stay open and it
// answers nothing. Resume undoes it.
func (s *EtcdServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused member (SIGCONT).
func (s *EtcdServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *EtcdServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
