package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/serve"
)

// TestRaceForOneLock: two clients race for one lock over HTTP; exactly one
// wins, the other gets 409 naming the holder; each round's grant has a
// higher fence than the last.
func TestRaceForOneLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		var last uint64
		for round := range 5 {
			var wg sync.WaitGroup
			codes := make([]int, 2)
			got := make([]lease, 2)
			probs := make([]problem, 2)
			for i := range 2 {
				wg.Go(func() {
					var raw map[string]any
					codes[i], _ = e.call("POST", "/v1/locks/race/acquire", clientTok,
						map[string]any{"wait_ms": 0, "owner": fmt.Sprintf("client-%d", i)}, &raw)
					if codes[i] == 200 {
						got[i] = lease{LeaseID: raw["lease_id"].(string), Fence: uint64(raw["fence"].(float64))}
					} else {
						probs[i].Type, _ = raw["type"].(string)
						probs[i].Holder, _ = raw["holder"].(map[string]any)
					}
				})
			}
			wg.Wait()
			win := 0
			if codes[0] != 200 {
				win = 1
			}
			lose := 1 - win
			if codes[win] != 200 || codes[lose] != 409 {
				t.Fatalf("round %d: statuses %v, want one 200 and one 409", round, codes)
			}
			if !strings.HasSuffix(probs[lose].Type, "/held") || probs[lose].Holder["owner"] != fmt.Sprintf("client-%d", win) {
				t.Fatalf("round %d: the 409 %+v does not name the winner client-%d", round, probs[lose], win)
			}
			if got[win].Fence <= last {
				t.Fatalf("round %d: fence %d after %d: not increasing", round, got[win].Fence, last)
			}
			last = got[win].Fence
			if code, _ := e.call("DELETE", "/v1/leases/"+got[win].LeaseID, clientTok, nil, nil); code != 204 {
				t.Fatalf("release: %d", code)
			}
			if code, _ := e.call("DELETE", "/v1/leases/"+got[win].LeaseID, clientTok, nil, nil); code != 404 {
				t.Fatalf("second release: %d, want 404", code)
			}
		}
	})
}

// TestLostPushedOnForceRelease: a force-release through the admin API
// reaches the holder's events stream as "lost" (force-released) before
// the holder's next refresh (a third of the TTL) could have found it, on
// every backend: also right after the grant (before a Redis Locker's
// eviction subscription is up) and on the file backend, which pushes
// nothing (the server ends its own lease on the force-release).
func TestLostPushedOnForceRelease(t *testing.T) {
	eachOf(t, withFile(t, backends(t)), func(t *testing.T, e *env) {
		ls := e.acquire("report", map[string]any{"ttl_ms": 3000})
		ch, stop := e.stream("/v1/leases/" + ls.LeaseID + "/events")
		defer stop()
		if ev := next(t, ch, 5*time.Second); ev.name != "held" || !strings.Contains(ev.data, ls.LeaseID) {
			t.Fatalf("first event %+v, want held", ev)
		}
		var fr struct {
			Evicted  map[string]any `json:"evicted"`
			NewFence uint64         `json:"new_fence"`
		}
		start := time.Now()
		if code, _ := e.call("POST", "/v1/locks/report/force-release", adminTok, map[string]any{}, &fr); code != 200 {
			t.Fatalf("force-release: %d", code)
		}
		if fr.Evicted["fence"] != float64(ls.Fence) || fr.NewFence <= ls.Fence {
			t.Fatalf("force-release answered %+v for fence %d", fr, ls.Fence)
		}
		ev := next(t, ch, 3*time.Second)
		if ev.name != "lost" || !strings.Contains(ev.data, `"reason":"force-released"`) {
			t.Fatalf("event %+v, want lost, force-released", ev)
		}
		if took := ev.at.Sub(start); took >= time.Second {
			t.Fatalf("lost reached the stream %s after the force-release, want before the next refresh (1s, a third of the TTL)", took)
		}
		t.Logf("lost reached the stream %s after the force-release (%s)", ev.at.Sub(start).Round(time.Millisecond), ev.data)
		var p problem
		if code, _ := e.call("POST", "/v1/leases/"+ls.LeaseID+"/renew", clientTok, nil, &p); code != 410 || p.Reason != "force-released" {
			t.Fatalf("renew of a lost lease: %d %+v, want 410 with the reason", code, p)
		}
		var st lease
		if e.call("GET", "/v1/leases/"+ls.LeaseID, clientTok, nil, &st); st.State != "lost" {
			t.Fatalf("state %q, want lost", st.State)
		}
		late, stopLate := e.stream("/v1/leases/" + ls.LeaseID + "/events")
		defer stopLate()
		if ev := next(t, late, time.Second); ev.name != "lost" {
			t.Fatalf("a stream opened after the loss begins with %+v, want lost", ev)
		}
		if code, _ := e.call("DELETE", "/v1/leases/"+ls.LeaseID, clientTok, nil, &p); code != 410 || p.Reason != "force-released" {
			t.Fatalf("release of a lost lease: %d %+v, want 410 force-released", code, p)
		}
	})
}

// TestVanishedClientLosesLease: with no stream and no renew a lease is
// released within two TTLs of its grant (one TTL, then the reaper's tick,
// the release and the test's polling, loosely bounded for a loaded
// machine), and not before its TTL; an open stream or renews keep one for
// 4 TTLs.
func TestVanishedClientLosesLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		const ttl, slack = 600 * time.Millisecond, 600 * time.Millisecond
		body := map[string]any{"ttl_ms": ttl.Milliseconds(), "wait_ms": 0}
		streamed := e.acquire("streamed", body)
		renewed := e.acquire("renewed", body)
		_, stop := e.stream("/v1/leases/" + streamed.LeaseID + "/events")
		defer stop()
		sent := time.Now()
		gone := e.acquire("gone", body)
		granted := time.Now()
		var goneAt time.Time
		lastRenew := time.Now()
		for time.Since(sent) < 4*ttl {
			if time.Since(lastRenew) > ttl/4 {
				if code, _ := e.call("POST", "/v1/leases/"+renewed.LeaseID+"/renew", clientTok, nil, nil); code != 200 {
					t.Fatalf("renew: %d", code)
				}
				lastRenew = time.Now()
			}
			if goneAt.IsZero() {
				if code, _ := e.call("GET", "/v1/leases/"+gone.LeaseID, clientTok, nil, nil); code == 404 {
					goneAt = time.Now()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		switch {
		case goneAt.IsZero():
			t.Fatal("an abandoned lease is still kept after 4 TTLs")
		case goneAt.Sub(sent) < ttl:
			t.Fatalf("an abandoned lease was released %s after its acquire was sent, before its TTL %s", goneAt.Sub(sent), ttl)
		case goneAt.Sub(granted) > ttl+slack:
			t.Fatalf("an abandoned lease was released %s after its grant, later than TTL %s + %s", goneAt.Sub(granted), ttl, slack)
		}
		t.Logf("the abandoned lease was released %s after its grant (TTL %s)", goneAt.Sub(granted).Round(time.Millisecond), ttl)
		if code, _ := e.call("POST", "/v1/locks/gone/acquire", clientTok, body, nil); code != 200 {
			t.Fatalf("the abandoned lock is not free: %d", code)
		}
		for _, ls := range []lease{streamed, renewed} {
			var st lease
			if e.call("GET", "/v1/leases/"+ls.LeaseID, clientTok, nil, &st); st.State != "held" {
				t.Fatalf("%s: state %q after 4 TTLs, want held", ls.Name, st.State)
			}
			if code, _ := e.call("POST", "/v1/locks/"+ls.Name+"/acquire", clientTok, body, nil); code != 409 {
				t.Fatalf("%s taken by another client while kept: %d", ls.Name, code)
			}
		}
	})
}

// TestBadInput: every malformed request gets a 4xx problem naming what
// is wrong.
func TestBadInput(t *testing.T) {
	e := newEnv(t, "mem://bad-input", func(c *serve.Config) { c.MaxBodyBytes = 1024 })
	long := strings.Repeat("n", 600)
	cases := []struct {
		path, body string
		code       int
		detail     string
	}{
		{"/v1/locks/a/acquire", `{"ttl_ms":`, 400, "unexpected EOF"},
		{"/v1/locks/a/acquire", `{"ttl":5}`, 400, `unknown field "ttl"`},
		{"/v1/locks/a/acquire", `{"ttl_ms":"5s"}`, 400, "ttl_ms"},
		{"/v1/locks/a/acquire", `{"ttl_ms":-5}`, 400, "ttl_ms -5"},
		{"/v1/locks/a/acquire", `{"ttl_ms":1}`, 400, "ttl_ms 1 is out of range"},
		{"/v1/locks/a/acquire", `{"wait_ms":-2}`, 400, "wait_ms -2"},
		{"/v1/locks/a/acquire", `{} {}`, 400, "more than one"},
		{"/v1/locks/a/acquire", `{"owner":"` + strings.Repeat("o", 2000) + `"}`, 413, "1024 bytes"},
		{"/v1/locks/" + long + "/acquire", `{}`, 400, "600"},
		{"/v1/semaphores/s/acquire", `{}`, 400, "permits is required"},
		{"/v1/semaphores/s/acquire", `{"permits":5000}`, 400, "5000"},
		{"/v1/leases/nope", ``, 404, "no lease"},
	}
	for _, c := range cases {
		method := "POST"
		if strings.HasPrefix(c.path, "/v1/leases/") {
			method = "GET"
		}
		var p problem
		code, h := e.call(method, c.path, clientTok, c.body, &p)
		if code != c.code || !strings.Contains(p.Detail, c.detail) || h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %.40s %.40q: %d %q (%s), want %d naming %q", method, c.path, c.body, code, p.Detail, h.Get("Content-Type"), c.code, c.detail)
		}
	}
}

// TestAuth: no token, a wrong token, a client token on an admin route,
// and a client over its rate are each refused.
func TestAuth(t *testing.T) {
	e := newEnv(t, "mem://auth", func(c *serve.Config) { c.RatePerSecond, c.Burst = 1, 5 })
	if code, h := e.call("GET", "/v1/locks", "", nil, nil); code != 401 || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := e.call("GET", "/v1/locks", wrongTok, nil, nil); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	if code, _ := e.call("POST", "/v1/locks/x/force-release", clientTok, "{}", nil); code != 403 {
		t.Fatalf("client token on an admin route: %d", code)
	}
	if code, _ := e.call("GET", "/healthz", "", nil, nil); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	limited := false
	for range 20 {
		code, h := e.call("GET", "/v1/locks", clientTok, nil, nil)
		if code == http.StatusTooManyRequests {
			limited = h.Get("Retry-After") != ""
			break
		}
	}
	if !limited {
		t.Fatal("20 requests at once, burst 5, 1/s: never 429 with Retry-After")
	}
	// Another client has its own bucket.
	if code, _ := e.call("GET", "/v1/locks", adminTok, nil, nil); code != 200 {
		t.Fatalf("admin client limited by another client's use: %d", code)
	}
}

// TestNewRefusesNoAuth: a server with no token must be asked to run
// without authentication.
func TestNewRefusesNoAuth(t *testing.T) {
	l := openLocker(t, "mem://noauth")
	if _, err := serve.New(serve.Config{Locker: l}); err == nil || !strings.Contains(err.Error(), "InsecureNoAuth") {
		t.Fatalf("New with no tokens: %v", err)
	}
	if _, err := serve.New(serve.Config{Locker: l, Tokens: []string{"short"}}); err == nil {
		t.Fatal("a 5-character token accepted")
	}
	if _, err := serve.New(serve.Config{}); err == nil {
		t.Fatal("no Locker accepted")
	}
}

// TestPrimitives: semaphores and elections over HTTP.
func TestPrimitives(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		body := map[string]any{"permits": 2, "wait_ms": 0}
		var a, b lease
		if c, _ := e.call("POST", "/v1/semaphores/pool/acquire", clientTok, body, &a); c != 200 {
			t.Fatalf("permit 1: %d", c)
		}
		if c, _ := e.call("POST", "/v1/semaphores/pool/acquire", clientTok, body, &b); c != 200 {
			t.Fatalf("permit 2: %d", c)
		}
		if a.Kind != "permit" || a.Slot == b.Slot {
			t.Fatalf("permits %+v %+v", a, b)
		}
		if c, _ := e.call("POST", "/v1/semaphores/pool/acquire", clientTok, body, nil); c != 409 {
			t.Fatalf("third permit of 2: %d", c)
		}
		var p problem
		if c, _ := e.call("POST", "/v1/locks/pool/acquire", clientTok, map[string]any{"wait_ms": 0}, &p); c != 200 && !strings.Contains(p.Type, "kind") {
			t.Logf("a mutex named like a semaphore: %d %s", c, p.Detail)
		}
		var term lease
		if c, _ := e.call("POST", "/v1/elections/sched/campaign", clientTok, map[string]any{"value": "node-a", "wait_ms": 1000}, &term); c != 200 || term.Kind != "leader" {
			t.Fatalf("campaign: %d %+v", c, term)
		}
		var leader map[string]any
		if c, _ := e.call("GET", "/v1/elections/sched/leader", clientTok, nil, &leader); c != 200 || leader["owner"] != "node-a" || leader["fence"] != float64(term.Fence) {
			t.Fatalf("leader: %d %v", c, leader)
		}
		var fr map[string]any
		if c, _ := e.call("POST", "/v1/locks/pool/force-release", adminTok, map[string]any{"permit": a.Slot, "permits": 2}, &fr); c != 200 || fr["evicted"] == nil {
			t.Fatalf("force-release permit: %d %v", c, fr)
		}
		if c, _ := e.call("POST", "/v1/locks/sched/force-release", adminTok, map[string]any{"election": true}, &fr); c != 200 || fr["evicted"] == nil {
			t.Fatalf("force-release term: %d %v", c, fr)
		}
		if c, _ := e.call("GET", "/v1/elections/sched/leader", clientTok, nil, nil); c != 404 {
			t.Fatalf("leader after the term ended: %d", c)
		}
	})
}

// TestClientGoneWhileWaiting: a client that disconnects while its acquire
// waits gets no lease: after the holder releases, the lock is free.
func TestClientGoneWhileWaiting(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		held := e.acquire("queue", map[string]any{"wait_ms": 0})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/locks/queue/acquire", strings.NewReader(`{"wait_ms":10000}`))
		req.Header.Set("Authorization", "Bearer "+clientTok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("the waiting acquire answered %d before the client left", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond) // the server sees the disconnect
		if code, _ := e.call("DELETE", "/v1/leases/"+held.LeaseID, clientTok, nil, nil); code != 204 {
			t.Fatalf("release: %d", code)
		}
		time.Sleep(200 * time.Millisecond)
		if code, _ := e.call("POST", "/v1/locks/queue/acquire", clientTok, map[string]any{"wait_ms": 0}, nil); code != 200 {
			t.Fatalf("the lock went to a client that had left: %d", code)
		}
	})
}

// TestCloseReleasesAndEndsStreams: Server.Close releases every lease, so
// the names are free on the backend, and tells each events stream so
// ("released", the lease released by the shutdown) before ending it.
func TestCloseReleasesAndEndsStreams(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		a := e.acquire("closing-a", map[string]any{"ttl_ms": 60000})
		e.acquire("closing-b", map[string]any{"ttl_ms": 60000})
		ch, stop := e.stream("/v1/leases/" + a.LeaseID + "/events")
		defer stop()
		if ev := next(t, ch, 5*time.Second); ev.name != "held" {
			t.Fatalf("first event %+v", ev)
		}
		start := time.Now()
		if err := e.srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		var got []string
		for end := time.After(5 * time.Second); ; {
			select {
			case ev, ok := <-ch:
				if ok {
					got = append(got, ev.name+" "+ev.data)
					continue
				}
			case <-end:
				t.Fatalf("the events stream is still open 5s after Close (events %q)", got)
			}
			break
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], "released ") || !strings.Contains(got[0], a.LeaseID) {
			t.Fatalf("after Close the stream sent %q, want one released event naming the lease, then its end", got)
		}
		t.Logf("the stream ended %s after Close, with %s", time.Since(start).Round(time.Millisecond), got[0])
		for _, name := range []string{"closing-a", "closing-b"} {
			ls, err := e.locker.TryAcquire(context.Background(), name)
			if err != nil {
				t.Fatalf("%s after Close: %v (the server kept it)", name, err)
			}
			_ = ls.Release(context.Background())
		}
	})
}

// TestUnmatchedRoutes: an unknown path or a wrong method is a problem
// document too (405 with Allow), and the bearer scheme is case-insensitive.
func TestUnmatchedRoutes(t *testing.T) {
	e := newEnv(t, "mem://unmatched", nil)
	var p problem
	if code, h := e.call("GET", "/v1/nope", clientTok, nil, &p); code != 404 || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(p.Detail, "/v1/nope") {
		t.Errorf("unknown path: %d %s %+v", code, h.Get("Content-Type"), p)
	}
	p = problem{}
	if code, h := e.call("PUT", "/v1/locks/x/acquire", clientTok, nil, &p); code != 405 || h.Get("Allow") != "POST" || !strings.Contains(p.Detail, "PUT") {
		t.Errorf("wrong method: %d Allow %q %+v", code, h.Get("Allow"), p)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/locks", nil)
	req.Header.Set("Authorization", "bearer "+clientTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("lower-case bearer scheme: %d", resp.StatusCode)
	}
}
