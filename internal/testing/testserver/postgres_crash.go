package testserver

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Crash is a crash of the whole server: the postmaster is frozen, then it
// and every child process (backends, checkpointer, WAL writer) get
// SIGKILL, and Crash waits, up to 10 s, until all of them are gone. Kill
// is not enough before a Restart: PostgreSQL's children call setsid, so
// they are not in the postmaster's process group, outlive it for a
// moment, and a Restart then fails with "pre-existing shared memory block
// is still in use".
func (s *PostgresServer) Crash() {
	cmd, _ := s.process()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pm := cmd.Process.Pid
	_ = syscall.Kill(pm, syscall.SIGSTOP) // no new children from here on
	kids := childPIDs(pm)
	_ = syscall.Kill(pm, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	s.Kill() // the process group, and waits for the postmaster
	deadline := time.Now().Add(10 * time.Second)
	for _, k := range kids {
		for alive(k) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// childPIDs lists the processes whose parent is pid, from /proc.
func childPIDs(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parentPID(n) == pid {
			kids = append(kids, n)
		}
	}
	return kids
}

// parentPID reads the 4th field of /proc/pid/stat (after the command
// name, which may contain spaces, in parentheses).
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z'
}
