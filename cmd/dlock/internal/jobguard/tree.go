package jobguard

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// proc is one entry of /proc: enough to find a process's descendants.
type proc struct {
	pid, ppid, pgrp int
	zombie          bool
}

// scanProcs reads every process's parent and process group from /proc.
// Processes that exit during the scan are skipped.
func scanProcs() ([]proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	procs := make([]proc, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid pgrp ...". comm
// may hold spaces and parentheses, so the fields are read after the last ')'.
func readStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, pgrp: pgrp, zombie: f[0][0] == 'Z' || f[0][0] == 'X'}, true
}

// descendants returns the living (not zombie) descendants of root.
func descendants(procs []proc, root int) []proc {
	children := make(map[int][]proc, len(procs))
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []proc
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if c.pid == root { // cannot happen in a tree; guards a torn scan
				continue
			}
			queue = append(queue, c.pid)
			if !c.zombie {
				out = append(out, c)
			}
		}
	}
	return out
}

// tree is the set of processes that make up a job.
type tree struct {
	// root's living descendants are the job when descendants is set: root
	// is the guard, a child subreaper, so orphans of the job stay its
	// descendants. Otherwise the job is the members of process group pgid.
	root        int
	descendants bool
	pgid        int // the job's process group (the command's pid)
	exclude     int // never signalled: the dead guard, seen from dlock
}

// members lists the job's living processes.
func (t tree) members() ([]proc, error) {
	procs, err := scanProcs()
	if err != nil {
		return nil, err
	}
	if t.descendants {
		procs = descendants(procs, t.root)
	}
	var out []proc
	for _, p := range procs {
		if p.pid == t.exclude || p.zombie || (!t.descendants && p.pgrp != t.pgid) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// signal sends s to every process of the job once: to the process group in
// one call while it has members (atomic against forks inside the group),
// then to each member outside it (those that called setsid or setpgid).
// It returns how many processes it found.
func (t tree) signal(s syscall.Signal) (int, error) {
	ms, err := t.members()
	if err != nil {
		return 0, err
	}
	inGroup := false
	for _, p := range ms {
		if t.pgid > 0 && p.pgrp == t.pgid {
			inGroup = true
			continue
		}
		_ = unix.Kill(p.pid, s)
	}
	if inGroup {
		_ = unix.Kill(-t.pgid, s)
	}
	return len(ms), nil
}

// errSurvivors: processes were still being found when the kill loop gave up
// (a fork bomb outrunning it, or processes stuck in the kernel).
var errSurvivors = errors.New("processes of the job survived SIGKILL")

// kill sends SIGKILL to the job until no living process of it is left, or
// until limit. Forks that race one round are found by the next scan.
func (t tree) kill(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		n, err := t.signal(syscall.SIGKILL)
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return errSurvivors
		}
		time.Sleep(pause)
	}
}

// BecomeSubreaper makes the calling process a child subreaper
// (PR_SET_CHILD_SUBREAPER): processes orphaned below it are re-parented to
// it instead of to init, so that they stay its descendants and can be
// found and killed. dlock calls it at start, so that if the guard process
// dies, the job it leaves behind is re-parented to dlock.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// isSubreaper reports whether the calling process is a child subreaper.
func isSubreaper() bool {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false
	}
	return v != 0
}
