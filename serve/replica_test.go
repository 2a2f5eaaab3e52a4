package serve_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/pglock"
	"github.com/dlockdev/dlock/serve"
)

// Two keys of the replicas: the current one, and one being rotated out.
var (
	leaseKey    = []byte("0123456789abcdef0123456789abcdef-current")
	oldLeaseKey = []byte("0123456789abcdef0123456789abcdef-old")
)

// replicas starts n servers on one backend URL, each with its own Locker,
// sharing the lease keys.
func replicas(t *testing.T, backend string, n int, keys ...[]byte) []*env {
	if len(keys) == 0 {
		keys = [][]byte{leaseKey}
	}
	var out []*env
	for range n {
		out = append(out, newEnv(t, backend, func(c *serve.Config) { c.LeaseKeys, c.Tokens = keys, []string{clientTok, otherTok} }))
	}
	return out
}

// eachReplicaBackend runs fn on the in-process backend, a real Redis and
// the file backend.
func eachReplicaBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for name, u := range withFile(t, backends(t)) {
		t.Run(name, func(t *testing.T) { fn(t, u()) })
	}
}

// TestReplicasServeAnyLease: a lease granted through one replica is
// renewed, followed and released through another, and keeps its fence.
func TestReplicasServeAnyLease(t *testing.T) {
	eachReplicaBackend(t, func(t *testing.T, backend string) {
		rs := replicas(t, backend, 2)
		a, b := rs[0], rs[1]
		ls := a.acquire("jobs", map[string]any{"ttl_ms": 2000})
		var renewed lease
		if code, _ := b.call("POST", "/v1/leases/"+ls.LeaseID+"/renew", clientTok, map[string]any{}, &renewed); code != 200 {
			t.Fatalf("renew through the other replica: %d, want 200", code)
		}
		if renewed.Fence != ls.Fence || renewed.LeaseID != ls.LeaseID {
			t.Fatalf("renewed through the other replica: fence %d id same %v, want fence %d and the same id", renewed.Fence, renewed.LeaseID == ls.LeaseID, ls.Fence)
		}
		ch, stop := b.stream("/v1/leases/" + ls.LeaseID + "/events")
		defer stop()
		if ev := next(t, ch, 5*time.Second); ev.name != "held" {
			t.Fatalf("first event through the other replica: %q, want held", ev.name)
		}
		if code, _ := a.call("POST", "/v1/locks/jobs/acquire", otherTok, map[string]any{"wait_ms": 0}, nil); code != 409 {
			t.Fatalf("another client's acquire while held: %d, want 409", code)
		}
		if code, _ := b.call("DELETE", "/v1/leases/"+ls.LeaseID, clientTok, nil, nil); code != 204 {
			t.Fatalf("release through the other replica: %d, want 204", code)
		}
		if ev := next(t, ch, 5*time.Second); ev.name != "released" {
			t.Fatalf("stream after the release: %q, want released", ev.name)
		}
		again := a.acquire("jobs", map[string]any{"ttl_ms": 2000, "wait_ms": 0})
		if again.Fence <= ls.Fence {
			t.Fatalf("the next grant has fence %d, want above %d", again.Fence, ls.Fence)
		}
	})
}

// TestReplicaStopHandsOff: a replica that stops hands its leases on
// ("handoff") instead of releasing them, and another replica keeps the
// lease past several TTLs once the client follows it there (2 s TTLs:
// a loaded machine still confirms a refresh within two thirds of one).
func TestReplicaStopHandsOff(t *testing.T) {
	eachReplicaBackend(t, func(t *testing.T, backend string) {
		rs := replicas(t, backend, 2)
		a, b := rs[0], rs[1]
		const ttl = 2 * time.Second
		ls := a.acquire("jobs", map[string]any{"ttl_ms": ttl.Milliseconds()})
		ch, stop := a.stream("/v1/leases/" + ls.LeaseID + "/events")
		defer stop()
		if ev := next(t, ch, 5*time.Second); ev.name != "held" {
			t.Fatalf("first event: %q, want held", ev.name)
		}
		if err := a.srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if ev := next(t, ch, 5*time.Second); ev.name != "handoff" {
			t.Fatalf("the stopping replica's last event: %q, want handoff", ev.name)
		}
		moved, stop2 := b.stream("/v1/leases/" + ls.LeaseID + "/events")
		defer stop2()
		ev := next(t, moved, 5*time.Second)
		if ev.name != "held" || !strings.Contains(ev.data, `"fence":`) {
			t.Fatalf("the other replica's first event: %q %s, want held", ev.name, ev.data)
		}
		time.Sleep(3 * ttl)
		var got lease
		if code, _ := b.call("GET", "/v1/leases/"+ls.LeaseID, clientTok, nil, &got); code != 200 || got.State != "held" || got.Fence != ls.Fence {
			t.Fatalf("3 TTLs after the handoff: %d %+v, want held with fence %d", code, got, ls.Fence)
		}
		if code, _ := b.call("POST", "/v1/locks/jobs/acquire", otherTok, map[string]any{"wait_ms": 0}, nil); code != 409 {
			t.Fatalf("another client's acquire after the handoff: %d, want 409 (still held)", code)
		}
	})
}

// TestReplicaLeaseIDs: a lease id opens only for its own client, only
// unaltered, only with a shared key; a key being rotated out still opens.
func TestReplicaLeaseIDs(t *testing.T) {
	mem := fmtMem(t)
	old := replicas(t, mem, 1, oldLeaseKey)[0]
	rotated := replicas(t, mem, 1, leaseKey, oldLeaseKey)[0]
	stranger := replicas(t, mem, 1, []byte("another-key-0123456789abcdef0123456789"))[0]
	ls := old.acquire("jobs", map[string]any{"ttl_ms": 5000})
	if strings.Contains(ls.LeaseID, clientTok) || len(ls.LeaseID) < 40 {
		t.Fatalf("lease id %q: want an opaque sealed id", ls.LeaseID)
	}
	altered := []byte(ls.LeaseID)
	altered[len(altered)/2] ^= 1
	for _, c := range []struct {
		what  string
		e     *env
		id    string
		token string
		want  int
	}{
		{"another client", rotated, ls.LeaseID, otherTok, 404},
		{"an altered id", rotated, url.PathEscape(string(altered)), clientTok, 404},
		{"a replica without the key", stranger, ls.LeaseID, clientTok, 404},
		{"a replica rotating the key out", rotated, ls.LeaseID, clientTok, 200},
	} {
		if code, _ := c.e.call("POST", "/v1/leases/"+c.id+"/renew", c.token, map[string]any{}, nil); code != c.want {
			t.Errorf("renew by %s: %d, want %d", c.what, code, c.want)
		}
	}
	again := rotated.acquire("other", map[string]any{"ttl_ms": 5000})
	if code, _ := old.call("GET", "/v1/leases/"+again.LeaseID, clientTok, nil, nil); code != 404 {
		t.Errorf("an id sealed with the new key, on a replica with the old key only: %d, want 404", code)
	}
}

// TestReplicaAdoptsOnce: many requests at once for a lease a replica does
// not keep adopt it once.
func TestReplicaAdoptsOnce(t *testing.T) {
	rs := replicas(t, testserver.Redis(t).URL(), 2)
	a, b := rs[0], rs[1]
	ls := a.acquire("jobs", map[string]any{"ttl_ms": 5000})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _ := b.call("POST", "/v1/leases/"+ls.LeaseID+"/renew", clientTok, map[string]any{}, nil); code != 200 {
				t.Errorf("renew: %d", code)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.logs.String(), "adopted a lease"); n != 1 {
		t.Fatalf("16 renews at once adopted the lease %d times, want 1", n)
	}
}

// TestReplicaLetsGoOfAbandonedLease: a replica whose client stops talking
// to it lets the lease go without releasing it (the client may be talking
// to another replica), so the lock frees itself within about two TTLs.
func TestReplicaLetsGoOfAbandonedLease(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	rs := replicas(t, testserver.Redis(t).URL(), 2)
	a, b := rs[0], rs[1]
	ls := a.acquire("jobs", map[string]any{"ttl_ms": ttl.Milliseconds()})
	if code, _ := b.call("POST", "/v1/leases/"+ls.LeaseID+"/renew", clientTok, map[string]any{}, nil); code != 200 {
		t.Fatalf("renew through the other replica: %d", code)
	}
	// The client now renews through b only: a lets go of it, b keeps it.
	for range 12 {
		time.Sleep(ttl / 4)
		if code, _ := b.call("POST", "/v1/leases/"+ls.LeaseID+"/renew", clientTok, map[string]any{}, nil); code != 200 {
			t.Fatalf("renew through the replica the client talks to, after the other let go: %d, want 200", code)
		}
	}
	if !strings.Contains(a.logs.String(), "client gone, letting go") {
		t.Fatalf("the replica the client left did not let go of the lease:\n%s", a.logs.String())
	}
	// Then the client vanishes: the lock frees itself.
	deadline := time.Now().Add(30 * ttl)
	for {
		code, _ := a.call("POST", "/v1/locks/jobs/acquire", otherTok, map[string]any{"wait_ms": 0, "ttl_ms": 5000}, nil)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned lock is still taken after 30 TTLs: %d", code)
		}
		time.Sleep(ttl / 5)
	}
}

// TestReplicasRefuseBackendsThatCannotAdopt: a backend whose lock is a
// connection (Postgres advisory mode) cannot serve as replicas; New says
// so and why. Short keys are refused too.
func TestReplicasRefuseBackendsThatCannotAdopt(t *testing.T) {
	u := testserver.Postgres(t).URL() + "&mode=advisory"
	l, err := dlock.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = serve.New(serve.Config{Locker: l, Tokens: []string{clientTok}, LeaseKeys: [][]byte{leaseKey}})
	if err == nil || !strings.Contains(err.Error(), "replicas") || !strings.Contains(err.Error(), "connection") {
		t.Fatalf("New with lease keys on Postgres advisory mode = %v, want a refusal saying why", err)
	}
	mem, err := dlock.Open(context.Background(), fmtMem(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	_, err = serve.New(serve.Config{Locker: mem, Tokens: []string{clientTok}, LeaseKeys: [][]byte{[]byte("short")}})
	if err == nil || !strings.Contains(err.Error(), "5 bytes") || strings.Contains(err.Error(), "short") {
		t.Fatalf("New with a 5-byte lease key = %v, want an error naming its length, not the key", err)
	}
}

// fmtMem is a fresh in-process backend URL.
func fmtMem(t *testing.T) string { return backends(t)["mem"]() }

// TestReplicaPushesLossOnItsStream: the loss of a lease reaches the
// client's events stream on the replica that adopted it, whichever
// replica the force-release went through.
func TestReplicaPushesLossOnItsStream(t *testing.T) {
	eachReplicaBackend(t, func(t *testing.T, backend string) {
		rs := replicas(t, backend, 2)
		a, b := rs[0], rs[1]
		ls := a.acquire("jobs", map[string]any{"ttl_ms": 30000})
		ch, stop := b.stream("/v1/leases/" + ls.LeaseID + "/events")
		defer stop()
		if ev := next(t, ch, 5*time.Second); ev.name != "held" {
			t.Fatalf("first event: %q, want held", ev.name)
		}
		if code, _ := a.call("POST", "/v1/locks/jobs/force-release", adminTok, map[string]any{}, nil); code != 200 {
			t.Fatalf("force-release through the granting replica: %d", code)
		}
		// Well inside the 30 s TTL, so the loss came from the push or a
		// refresh, not from the lease running out.
		if ev := next(t, ch, 15*time.Second); ev.name != "lost" {
			t.Fatalf("the adopting replica's stream after a force-release: %q %s, want lost", ev.name, ev.data)
		}
	})
}
