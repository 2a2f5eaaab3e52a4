package demo

import (
	"context"
	"fmt"
	"time"
)

// runElection: leader A is paused past its term's TTL; B, campaigning, is
// elected with a higher term and writes; A wakes still believing it leads
// and writes too. The naive register takes both writes: two leaders wrote.
// The register fenced by term (keyed by the election's name) refuses A's.
func runElection(ctx context.Context, e *env) (string, bool, error) {
	naive, err := e.twoLeaders(ctx, "naive", "write")
	if err != nil {
		return "", false, err
	}
	fenced, err := e.twoLeaders(ctx, "fenced", "fenced-write")
	if err != nil {
		return "", false, err
	}
	v, ok := electionVerdict(naive, fenced)
	return v, ok, nil
}

// leaderWrites is one run of the election scenario: its writes log and
// what the register's row ended with.
type leaderWrites struct {
	log   []writeAttempt
	value string
}

// twoLeaders runs the pause choreography on an election of its own, in
// the scenario's directory sub: B campaigns while A is frozen, and is
// elected once A's term has expired.
func (e *env) twoLeaders(ctx context.Context, sub, then string) (leaderWrites, error) {
	if _, err := e.resource(sub); err != nil {
		return leaderWrites{}, err
	}
	name := e.lockName("leader-" + sub)
	e.say("--", "%s: leader A writes its config with every term; the register is %s", sub, map[string]string{
		"write": "a plain table", "fenced-write": "fenced by term (package fence, keyed by the election's name)"}[then])
	frozen := func(a *proc) error {
		if err := a.waitFor(ctx, "freezing", 30*time.Second); err != nil {
			return err
		}
		e.say("--", "A is frozen; B campaigns, and is elected once A's term (TTL %s) has expired", e.ttl)
		return nil
	}
	log, err := e.pausedWriter(ctx, sub, frozen, "--election", "--name", name, "--then", then)
	if err != nil {
		return leaderWrites{}, err
	}
	value, _, err := registerValue(ctx, e.res, name)
	return leaderWrites{log, value}, err
}

// electionVerdict says what the two runs showed; ok is true when the naive
// register took both leaders' writes and the fenced one refused A's.
func electionVerdict(naive, fenced leaderWrites) (string, bool) {
	switch {
	case !staleWrite(naive.log, true):
		return fmt.Sprintf("naive: expected B then A to write, got %v", naive.log), false
	case !staleWrite(fenced.log, false):
		return fmt.Sprintf("fenced: expected B's write accepted and A's rejected, got %v", fenced.log), false
	}
	return fmt.Sprintf("naive: two leaders wrote — B (term %d), then A (term %d), who still believed it led, and its stale %q stands; fenced by term: A's write (term %d < %d) was rejected and B's %q stands",
		naive.log[0].fence, naive.log[1].fence, naive.value, fenced.log[1].fence, fenced.log[0].fence, fenced.value), true
}
