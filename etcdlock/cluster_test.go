package etcdlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterMemberStopped: in a 3-member cluster, stopping a member the
// holder's client talks to (the leader, the worst case: an election
// follows) does not lose a healthy lease, and the lock stays exclusive.
func TestClusterMemberStopped(t *testing.T) {
	c := testserver.EtcdCluster(t, 3)
	cli := client(t, c.Endpoints...)
	ctx := context.Background()
	ttl := etcdlock.MinTTLFor(c.ElectionTimeout)
	l := lockerWith(t, c.ElectionTimeout, c.Endpoints...)
	ls, err := l.Acquire(ctx, "cluster", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	leader := leaderOf(t, cli, c)
	// The control: a holder whose client knows only the stopped member
	// cannot refresh, and must hear that its lease is lost.
	alone, err := lockerWith(t, c.ElectionTimeout, leader.Endpoint).Acquire(ctx, "cluster-control", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopping the leader %s (%s)", leader.Name, leader.Endpoint)
	leader.Stop()
	select {
	case <-ls.Done():
		t.Fatalf("lease lost after a member stopped: %v", ls.Err())
	case <-time.After(3 * ttl):
	}
	select {
	case <-alone.Done():
		t.Logf("control lease (client on the stopped member only): %v", alone.Err())
	default:
		t.Errorf("the lease of a client that can reach no member was not declared lost")
	}
	other := lockerWith(t, c.ElectionTimeout, survivors(c, leader)...)
	if _, err := other.TryAcquire(ctx, "cluster", dlock.WithTTL(ttl)); err == nil {
		t.Fatal("a second holder acquired the lock while the first still held it")
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release after the member stopped: %v", err)
	}
	ls2, err := other.TryAcquire(ctx, "cluster", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	if ls2.Fence() <= ls.Fence() {
		t.Errorf("fence %d after a leader change is not above %d", ls2.Fence(), ls.Fence())
	}
	_ = ls2.Release(ctx)
}

func leaderOf(t *testing.T, cli *clientv3.Client, c *testserver.EtcdClusterServer) *testserver.EtcdServer {
	t.Helper()
	for _, m := range c.Members {
		st, err := cli.Status(context.Background(), m.Endpoint)
		if err != nil {
			t.Fatalf("status of %s: %v", m.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return m
		}
	}
	t.Fatal("no leader")
	return nil
}

func survivors(c *testserver.EtcdClusterServer, gone *testserver.EtcdServer) []string {
	var eps []string
	for _, m := range c.Members {
		if m != gone {
			eps = append(eps, m.Endpoint)
		}
	}
	return eps
}

// electionTrials runs trials of a leader kill under a held lock of the
// given TTL on c, the kill landing at a different point of the refresh
// cycle each time, and returns how many trials kept the lock.
func electionTrials(t *testing.T, c *testserver.EtcdClusterServer, cfgElection, ttl time.Duration, trials int) (kept, excused int) {
	cli := client(t, c.Endpoints...)
	for i := range trials {
		waitLeader(t, c)
		l := lockerWith(t, cfgElection, c.Endpoints...)
		ls, err := l.Acquire(context.Background(), fmt.Sprintf("election/%s/%d", ttl, i), dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i) * ttl / 3 / time.Duration(trials))
		leader := leaderOf(t, cli, c)
		leader.Kill()
		outage := writeOutage(t, survivors(c, leader))
		select {
		case <-ls.Done():
			t.Logf("TTL %s, trial %d: lock lost after the leader was killed (writes failed for %s): %v", ttl, i+1, outage.Round(time.Millisecond), ls.Err())
			if outage > ttl/4 {
				excused++ // the cluster was out longer than the TTL allows for
			}
		case <-time.After(ttl + ttl/2):
			kept++
			_ = ls.Release(context.Background())
		}
		leader.Start()
		_ = l.Close()
	}
	return kept, excused
}

// writeOutage is how long, from now, the cluster of endpoints takes to
// accept a write again (a new leader elected and heard of): the time no
// renewal can be confirmed.
func writeOutage(t *testing.T, endpoints []string) time.Duration {
	t.Helper()
	cli := client(t, endpoints...)
	start := time.Now()
	for time.Since(start) < time.Minute {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := cli.Put(ctx, "election-probe", start.String())
		cancel()
		if err == nil {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the cluster took no write for a minute after a leader kill")
	return 0
}

// TestLeaderElectionKeepsLock: with the minimum TTL for the cluster's
// election timeout (8 s for etcd's default 1 s), killing the leader under
// a held lock never loses it (3 trials; DLOCK_TEST_TRIALS, 5 in make
// test-long), unless the cluster took longer
// than the TTL's budget for an election (TTL/4, see MinTTLFor) to take a
// write again: on a starved machine an election can take seconds, and
// such a loss is the budget's, not the lock's (it is logged). The control takes 3 s TTLs on
// the same cluster (claiming a short election timeout to be allowed to),
// which was seen to lose the lock in 3 of 5 trials: its count is
// reported, not asserted (it depends on timing), in make test-long only.
func TestLeaderElectionKeepsLock(t *testing.T) {
	if testing.Short() {
		t.Skip("about 2 minutes of leader kills")
	}
	c := testserver.EtcdCluster(t, 3)
	trials := testserver.Trials(3)
	ttl := etcdlock.MinTTLFor(c.ElectionTimeout)
	kept, excused := electionTrials(t, c, c.ElectionTimeout, ttl, trials)
	t.Logf("TTL %s (election timeout %s): %d of %d trials kept the lock through a leader kill", ttl, c.ElectionTimeout, kept, trials)
	if lost := trials - kept - excused; lost > 0 {
		t.Errorf("TTL %s lost the lock in %d of %d leader elections that took writes again within TTL/4", ttl, lost, trials)
	}
	if excused > 0 {
		t.Logf("%d losses came after the cluster took no write for more than TTL/4 (a starved machine): the TTL's budget, not the lock, ran out", excused)
	}
	if excused == trials {
		t.Errorf("every trial's election took longer than TTL/4: the test measured nothing")
	}
	if !testserver.LongRun() {
		return
	}
	short := 3 * time.Second
	ctl, _ := electionTrials(t, c, c.ElectionTimeout*3/8, short, trials)
	t.Logf("control: TTL %s: %d of %d trials kept the lock", short, ctl, trials)
}

// TestLeaderElectionKeepsWaitersPlace: a live waiter keeps its place in
// the queue through a leader kill, although its key waits under the wait
// lease (MinTTLFor(1 s) = 8 s here) rather than under the lock's 16 s
// lease: the leader is killed at a different point of the waiter's
// renewal cycle each trial, and two wait leases later (longer than the
// lease lives unrenewed, even counted from the new leader's start) the
// waiter's key is the one it queued (same create revision) and the
// waiter is granted on it when the holder releases, its fence that
// create revision.
func TestLeaderElectionKeepsWaitersPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("about a minute of leader kills")
	}
	c := testserver.EtcdCluster(t, 3)
	cli := client(t, c.Endpoints...)
	ctx := context.Background()
	wait := etcdlock.MinTTLFor(c.ElectionTimeout)
	ttl := 2 * wait
	trials := testserver.Trials(2)
	for i := range trials {
		waitLeader(t, c)
		name := fmt.Sprintf("election-waiter/%d", i)
		held, err := lockerWith(t, c.ElectionTimeout, c.Endpoints...).Acquire(ctx, name, dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		w := lockerWith(t, c.ElectionTimeout, c.Endpoints...)
		got := make(chan grant, 1)
		go func() {
			ls, err := w.Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithWait(time.Minute))
			got <- grant{1, ls, err}
		}()
		queued(t, cli, name, 2)
		place := contenders(t, cli, name)[1]
		time.Sleep(time.Duration(i) * wait / 3 / time.Duration(trials))
		leader := leaderOf(t, cli, c)
		leader.Kill()
		time.Sleep(2 * wait)
		now := contenders(t, cli, name)
		if len(now) != 2 || string(now[1].Key) != string(place.Key) || now[1].CreateRevision != place.CreateRevision {
			t.Errorf("trial %d: the waiter's place %s (created at %d) is gone after a leader kill: queue %v", i+1, place.Key, place.CreateRevision, now)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-got:
			if g.err != nil {
				t.Fatalf("trial %d: waiter: %v", i+1, g.err)
			}
			if g.ls.Fence() != uint64(place.CreateRevision) {
				t.Errorf("trial %d: waiter granted with fence %d, want its place's create revision %d", i+1, g.ls.Fence(), place.CreateRevision)
			}
			_ = g.ls.Release(ctx)
		case <-time.After(30 * time.Second):
			t.Fatalf("trial %d: waiter not granted within 30 s of the release", i+1)
		}
		leader.Start()
	}
}
