package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

const adminOwner = "admin-test-owner"

// TestAdminKeys: the key layout the admin calls scan and decode with
// keeps the lock keys that earlier versions wrote, and tells them from
// the other keys.
func TestAdminKeys(t *testing.T) {
	stored := map[string]string{
		"a": "dlock:redlock:{a}", "a/b": "dlock:redlock:{a/b}", "we}ird%7D{name": "dlock:redlock:{we%7Dird%257D{name}",
		"100%": "dlock:redlock:{100%25}", "*?[x]": "dlock:redlock:{*?[x]}",
	}
	for name, want := range stored {
		if got := layout.Lock(name); got != want {
			t.Errorf("layout.Lock(%q) = %q, want %q", name, got, want)
		}
		if got, ok := layout.Name(layout.Lock(name)); !ok || got != name {
			t.Errorf("layout.Name(layout.Lock(%q)) = %q, %v", name, got, ok)
		}
	}
	if _, ok := layout.Name(layout.LegacyFence("a")); ok {
		t.Error("a fence key decodes as a lock name")
	}
	for _, cluster := range []bool{false, true} {
		if _, ok := layout.Name(layout.Counter("a", cluster)); ok {
			t.Errorf("the node's fence counter (cluster %v) decodes as a lock name", cluster)
		}
	}
}

// TestAdminInspectList: Inspect and List report a lock held by a majority
// (with its owner, fence and TTL), not a free lock, not a key found on a
// minority of the nodes, and decode names exactly.
func TestAdminInspectList(t *testing.T) {
	ns := startNodes(t, 5)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	names := []string{"admin/held", "admin/we}ird%25{name*"}
	var leases []*dlock.Lease
	for _, name := range names {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(failTTL), dlock.WithOwner(adminOwner))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ls.Release(context.Background()) }()
		leases = append(leases, ls)
	}
	for _, ls := range leases {
		h, ok, err := l.Inspect(ctx, ls.Name())
		if err != nil || !ok {
			t.Fatalf("Inspect(%q) = ok %v, err %v; want held", ls.Name(), ok, err)
		}
		checkAdminHolder(t, "Inspect", h, ls)
	}
	if _, ok, err := l.Inspect(ctx, "admin/free"); err != nil || ok {
		t.Errorf("Inspect(free) = ok %v, err %v; want false, nil", ok, err)
	}
	// A foreign key on 2 of 5 nodes holds nothing.
	for _, i := range []int{0, 1} {
		if err := ns.admin[i].Set(ctx, layout.Lock("admin/minority"), "other/1\n7\nminor", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := l.Inspect(ctx, "admin/minority"); err != nil || ok {
		t.Errorf("Inspect(held on a minority) = ok %v, err %v; want false, nil", ok, err)
	}
	hs, err := l.List(ctx, "admin/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(hs) != 2 {
		t.Fatalf("List(admin/) = %+v, want the 2 held locks", hs)
	}
	for i, h := range hs { // sorted by name, as names is
		checkAdminHolder(t, "List", h, leases[i])
	}
	if hs, err := l.List(ctx, "admin/we}"); err != nil || len(hs) != 1 || hs[0].Name != names[1] {
		t.Errorf("List(admin/we}) = %+v, %v; want %q only", hs, err, names[1])
	}
	if hs, err := l.List(ctx, "nothing/"); err != nil || len(hs) != 0 {
		t.Errorf("List(nothing/) = %+v, %v; want none", hs, err)
	}
}

func checkAdminHolder(t *testing.T, what string, h dlock.Holder, ls *dlock.Lease) {
	t.Helper()
	if h.Name != ls.Name() || h.Owner != adminOwner || h.Fence != ls.Fence() || ls.Fence() == 0 {
		t.Errorf("%s = %+v, want name %q, owner %q, fence %d", what, h, ls.Name(), adminOwner, ls.Fence())
	}
	if h.TTL <= 0 || h.TTL > ls.TTL() {
		t.Errorf("%s: TTL %s, want in (0, %s]", what, h.TTL, ls.TTL())
	}
}

// TestAdminMajorityRule: the holder is the one a majority agrees on (any
// attempt of one token), with the smallest TTL among them; failed nodes
// that could tip the balance make the answer an error.
func TestAdminMajorityRule(t *testing.T) {
	d := &redlock{nodes: make([]node, 5), quorum: 3}
	held := func(raw string, ms int64) vote { return vote{present: true, raw: raw, pttl: ms} }
	down := vote{err: errNodeTimeout}
	cases := []struct {
		name    string
		votes   []vote
		ok      bool
		fence   uint64
		ttl     time.Duration
		wantErr bool
	}{
		{"all agree", []vote{held("t/1\n5\no", 900), held("t/1\n5\no", 800), held("t/1\n5\no", 950), held("t/1\n5\no", 990), held("t/1\n5\no", 999)}, true, 5, 800 * time.Millisecond, false},
		{"attempts differ", []vote{held("t/1\n5\no", 900), held("t/2\n5\no", 700), held("t/2\n5\no", 950), {}, {}}, true, 5, 700 * time.Millisecond, false},
		{"fences differ", []vote{held("t/1\n5\no", 900), held("t/1\n6\no", 900), held("t/1\n5\no", 900), held("t/1\n6\no", 900), {}}, false, 0, 0, false},
		{"minority", []vote{held("t/1\n5\no", 900), held("t/1\n5\no", 900), {}, {}, {}}, false, 0, 0, false},
		{"majority with 2 down", []vote{down, down, held("t/1\n5\no", 900), held("t/1\n5\no", 900), held("t/1\n5\no", 900)}, true, 5, 900 * time.Millisecond, false},
		{"free with 2 down", []vote{down, down, {}, {}, {}}, false, 0, 0, false},
		{"undecided", []vote{down, down, held("t/1\n5\no", 900), {}, {}}, false, 0, 0, true},
		{"free with 3 down", []vote{down, down, down, {}, {}}, false, 0, 0, true},
		{"no expiry", []vote{held("t/1\n5\no", -1), held("t/1\n5\no", -1), held("t/1\n5\no", 40), {}, {}}, true, 5, 40 * time.Millisecond, false},
		{"bad value", []vote{held("junk", 900), held("junk", 900), held("junk", 900), {}, {}}, false, 0, 0, true},
	}
	for _, c := range cases {
		h, ok, err := d.majority("n", c.votes)
		if (err != nil) != c.wantErr || ok != c.ok || (ok && (h.Fence != c.fence || h.TTL != c.ttl || h.Owner != "o" || h.Name != "n")) {
			t.Errorf("%s: majority = %+v, ok %v, err %v; want ok %v, fence %d, TTL %s, error %v", c.name, h, ok, err, c.ok, c.fence, c.ttl, c.wantErr)
		}
	}
}

// TestAdminForceRelease: ForceRelease evicts the holder, whose Refresh
// then reports the lease lost; the new fence exceeds the evicted one, and
// the next grant's fence exceeds the new one. On a free lock it still
// raises the fence.
func TestAdminForceRelease(t *testing.T) {
	ns := startNodes(t, 5)
	forceReleaseCycle(t, ns, "")
}

// TestAdminMinorityDown: with 2 of 5 nodes killed, Inspect, List and
// ForceRelease still work; with 3 killed they fail rather than guess.
func TestAdminMinorityDown(t *testing.T) {
	ns := startNodes(t, 5)
	ns.srv[1].Kill()
	ns.srv[3].Kill()
	l := forceReleaseCycle(t, ns, "minority/")
	ctx := t.Context()
	ns.srv[4].Kill()
	if _, _, err := l.Inspect(ctx, "minority/x"); !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("Inspect with 3 of 5 nodes down = %v, want a backend error", err)
	}
	if _, err := l.List(ctx, ""); !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("List with 3 of 5 nodes down = %v, want a backend error", err)
	}
	if _, _, _, err := l.ForceRelease(ctx, "minority/x"); !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("ForceRelease with 3 of 5 nodes down = %v, want a backend error", err)
	}
}

// forceReleaseCycle runs Inspect, List and ForceRelease over ns (some nodes
// may be down) and returns the admin Locker.
func forceReleaseCycle(t *testing.T, ns *nodes, prefix string) *dlock.Locker {
	t.Helper()
	ctx := t.Context()
	name := prefix + "force"
	victimL := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	victim, err := victimL.Acquire(ctx, name, dlock.WithTTL(failTTL), dlock.WithOwner(adminOwner), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	h, ok, err := l.Inspect(ctx, name)
	if err != nil || !ok {
		t.Fatalf("Inspect(held) = ok %v, err %v", ok, err)
	}
	checkAdminHolder(t, "Inspect", h, victim)
	if _, ok, err := l.Inspect(ctx, prefix+"free"); err != nil || ok {
		t.Errorf("Inspect(free) = ok %v, err %v; want false, nil", ok, err)
	}
	hs, err := l.List(ctx, prefix)
	if err != nil || len(hs) != 1 {
		t.Fatalf("List(%q) = %+v, %v; want the held lock", prefix, hs, err)
	}
	checkAdminHolder(t, "List", hs[0], victim)

	evicted, ok, fence, err := l.ForceRelease(ctx, name)
	if err != nil || !ok {
		t.Fatalf("ForceRelease = ok %v, err %v; want the holder evicted", ok, err)
	}
	if evicted.Owner != adminOwner || evicted.Fence != victim.Fence() || fence <= victim.Fence() {
		t.Errorf("ForceRelease evicted %+v, new fence %d; want owner %q, fence %d, new fence above it", evicted, fence, adminOwner, victim.Fence())
	}
	t.Logf("evicted fence %d, new fence %d", evicted.Fence, fence)
	if _, ok, err := l.Inspect(ctx, name); err != nil || ok {
		t.Errorf("Inspect after ForceRelease = ok %v, err %v; want free", ok, err)
	}
	if err := victim.Refresh(ctx, failTTL); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("the evicted holder's Refresh = %v, want ErrLost", err)
	}
	next, err := l.TryAcquire(ctx, name, dlock.WithTTL(failTTL))
	if err != nil {
		t.Fatalf("TryAcquire after ForceRelease: %v", err)
	}
	if next.Fence() <= fence {
		t.Errorf("next grant's fence %d, want > the new fence %d", next.Fence(), fence)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A free lock: nothing evicted, the fence still goes up.
	_, ok, fence2, err := l.ForceRelease(ctx, name)
	if err != nil || ok || fence2 <= next.Fence() {
		t.Errorf("ForceRelease(free) = ok %v, new fence %d, err %v; want false, above %d, nil", ok, fence2, err, next.Fence())
	}
	again, err := l.TryAcquire(ctx, name, dlock.WithTTL(failTTL))
	if err != nil {
		t.Fatal(err)
	}
	if again.Fence() <= fence2 {
		t.Errorf("grant after ForceRelease(free) has fence %d, want > %d", again.Fence(), fence2)
	}
	_ = again.Release(ctx)
	return l
}

// TestAdminForceReleaseWithoutFencing: with fencing off the lock is still
// deleted on every node, and the new fence is 0.
func TestAdminForceReleaseWithoutFencing(t *testing.T) {
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NoFencing: true, NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	ls, err := l.Acquire(ctx, "nofence", dlock.WithTTL(failTTL), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * suiteNodeTimeout) // the grant's requests to every node land
	_, ok, fence, err := l.ForceRelease(ctx, "nofence")
	if err != nil || !ok || fence != 0 {
		t.Errorf("ForceRelease = ok %v, fence %d, err %v; want true, 0, nil", ok, fence, err)
	}
	if on := ns.holding(t, "nofence"); len(on) != 0 {
		t.Errorf("lock key left on nodes %v", on)
	}
	if err := ls.Refresh(ctx, failTTL); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Refresh after ForceRelease = %v, want ErrLost", err)
	}
}

var _ driver.Lister = (*redlock)(nil)

// TestAdminForceReleaseSlowNode: a node that answers late (paused for
// 600 ms, twice the node timeout, while the admin client has no
// connection to it yet) still gets the force-release. Left there, the
// evicted lock would sit on that node for the rest of its TTL, and any
// acquire would then need every other node to answer in time.
func TestAdminForceReleaseSlowNode(t *testing.T) {
	ns := startNodes(t, 5)
	ctx := t.Context()
	holder := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ls, err := holder.Acquire(ctx, "slow/force", dlock.WithTTL(time.Minute), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	admin := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ns.srv[0].Pause()
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		time.Sleep(2 * suiteNodeTimeout)
		ns.srv[0].Resume()
	}()
	_, held, _, err := admin.ForceRelease(ctx, "slow/force")
	<-resumed
	if err != nil || !held {
		t.Fatalf("ForceRelease = held %v, %v; want the holder evicted", held, err)
	}
	if on := ns.holding(t, "slow/force"); len(on) != 0 {
		t.Errorf("after ForceRelease the lock is still on nodes %v; want it deleted on every node that answers", on)
	}
	_ = ls.Release(ctx)
}
