package testserver

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

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
// answers nothing. It returns once the kernel reports the process stopped
// (a signal is delivered asynchronously). Resume undoes it.
func (s *EtcdServer) Pause() {
	s.signal(syscall.SIGSTOP)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		waitStopped(s.cmd.Process.Pid)
	}
}

// waitStopped waits (up to a second) until every thread of pid is in
// state T (stopped), as /proc reports it.
func waitStopped(pid int) {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if allStopped(pid) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func allStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true // not Linux, or gone: nothing to wait for
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue
		}
		// pid (comm) STATE ...: the state follows the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}

// Resume continues a paused member (SIGCONT).
func (s *EtcdServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *EtcdServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
