package chaos

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestS3RedisRestart: Redis is SIGKILLed and restarted right after a grant,
// without persistence, with appendonly + appendfsync everysec, and with
// appendfsync always. Does a later fence ever fall below an earlier one?
// (It must not: the fence is floored at the server's clock.) Is the held
// lock forgotten, so that a second holder is granted while the first
// still believes it holds? Without persistence it is (the negative
// control); with an AOF it must not be.
func TestS3RedisRestart(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"no persistence", nil},
		{"appendfsync everysec", []string{"--appendonly", "yes", "--appendfsync", "everysec"}},
		{"appendfsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := testserver.Redis(t, c.args...)
			s3Case(t, srv, c.name, c.args == nil)
		})
	}
}

func s3Case(t *testing.T, srv *testserver.RedisServer, setting string, volatile bool) {
	b := redisBackend(t, srv)
	b.Name = "redis, " + setting
	fences := Row{Scenario: "S3 Redis SIGKILL+restart after a grant: fence not above the earlier one",
		Backend: b.Name, Expect: ExpectSafe, Metric: "kill→next grant"}
	doubles := Row{Scenario: "S3 Redis SIGKILL+restart after a grant: second holder while the first believes",
		Backend: b.Name, Expect: ExpectSafe, Metric: "kill→first holder told"}
	switch {
	case volatile:
		doubles.Scenario = "S3 Redis SIGKILL+restart, no persistence control: second holder while the first believes"
		doubles.Expect = ExpectViolation
	case strings.Contains(setting, "everysec"):
		// Measured, not judged: with everysec Redis may postpone the AOF
		// write behind a slow background fsync (up to 2 s) and still
		// reply, so even a process crash can lose an acknowledged grant
		// (1 of 20 in the first full run). Only "always" is judged safe.
		doubles.Expect = ExpectReport
	}
	a := openLocker(t, b, dlock.WithTTL(b.TTL))
	next := openLocker(t, b, dlock.WithTTL(b.TTL))
	kept := 0
	for i := range trials(1) {
		r := holdThroughFault(t, a, next, lockName("s3", i), srv.Crash, 3*b.TTL)
		for _, row := range []*Row{&fences, &doubles} {
			row.Trials++
			if r.lin != nil {
				row.Unlinearizable++
			}
		}
		if r.lin != nil {
			t.Logf("trial %d: %v (fences %d then %d)", i, r.lin, r.first, r.second)
		}
		if r.fenceBack {
			fences.Violations++
		}
		if r.overlap {
			doubles.Violations++
		}
		fences.Timings = append(fences.Timings, r.next)
		if r.kept {
			kept++
		} else {
			doubles.Timings = append(doubles.Timings, r.told)
		}
	}
	fences.Unlinearizable = -1 // judged on the fence alone; the history is in the other row
	doubles.Note = fmt.Sprintf("first holder kept the lock through the restart: %d", kept)
	report(t, fences)
	report(t, doubles)
}
