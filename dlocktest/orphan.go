package dlocktest

import (
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testOrphanRecovery SIGKILLs a child process that holds a lock: the lock
// must become free within its TTL plus a margin (the child's lease simply
// stops being refreshed; a session-bound backend frees it sooner).
func (s *suite) testOrphanRecovery(t *testing.T) {
	s.needProcesses(t)
	name := s.name(t)
	c := s.startChild(t, childSpec{Role: roleHold, Names: []string{name}})
	if line := c.line(t, time.Minute); !strings.HasPrefix(line, "held ") {
		t.Fatalf("child said %q, want \"held FENCE\"; stderr:\n%s", line, c.stderr.String())
	}
	s.expectHeldElsewhere(t, name)
	c.kill()
	killed := time.Now()
	bound := s.ttl + s.slack()
	ls, err := s.locker(t).Acquire(s.ctx(t), name, s.opts(dlock.WithWait(bound))...)
	if err != nil {
		t.Fatalf("lock of a SIGKILLed holder not free %s later (TTL %s): %v", time.Since(killed), s.ttl, err)
	}
	t.Logf("orphaned lock acquired %s after SIGKILL (TTL %s)", time.Since(killed), s.ttl)
	release(t, ls)
}
