package serve_test

import (
	"strings"
	"testing"
	"time"
)

// TestDurationsBoundedBeforeConversion: a ttl_ms or wait_ms too large for
// time.Duration is refused with a 400 that names the value as sent, never
// wrapped around into a short lease; a renew cannot shrink a lease that
// way either; wait_ms -1 still means no bound.
func TestDurationsBoundedBeforeConversion(t *testing.T) {
	e := newEnv(t, "mem://durations", nil)
	for _, c := range []struct{ body, detail string }{
		{`{"ttl_ms":18446744073740}`, "ttl_ms 18446744073740"},
		{`{"ttl_ms":9223372036855}`, "ttl_ms 9223372036855"},
		{`{"ttl_ms":9223372036854775807}`, "ttl_ms 9223372036854775807"},
		{`{"ttl_ms":86400001}`, "ttl_ms 86400001"},
		{`{"ttl_ms":0}`, "ttl_ms 0"},
		{`{"ttl_ms":1}`, "ttl_ms 1"},
		{`{"wait_ms":18446744073740}`, "wait_ms 18446744073740"},
		{`{"wait_ms":9223372036854775807}`, "wait_ms 9223372036854775807"},
		{`{"wait_ms":-9223372036854775808}`, "wait_ms -9223372036854775808"},
	} {
		var p problem
		code, _ := e.call("POST", "/v1/locks/overflow/acquire", clientTok, c.body, &p)
		if code != 400 || !strings.Contains(p.Detail, c.detail) || strings.Contains(p.Detail, "-2562047h") {
			t.Errorf("acquire %s: %d %q, want 400 naming %q", c.body, code, p.Detail, c.detail)
		}
	}
	ls := e.acquire("renewed", map[string]any{"ttl_ms": 60000, "wait_ms": 0})
	var p problem
	if code, _ := e.call("POST", "/v1/leases/"+ls.LeaseID+"/renew", clientTok, `{"ttl_ms":18446744073740}`, &p); code != 400 || !strings.Contains(p.Detail, "ttl_ms 18446744073740") {
		t.Errorf("renew to ttl_ms 18446744073740: %d %q, want 400 naming it", code, p.Detail)
	}
	var st lease
	if e.call("GET", "/v1/leases/"+ls.LeaseID, clientTok, nil, &st); st.State != "held" || st.TTLms != 60000 {
		t.Errorf("after the refused renew the lease is %q with ttl_ms %d, want held with 60000", st.State, st.TTLms)
	}
	time.Sleep(200 * time.Millisecond) // a lease shrunk to 30 ms would be gone by now
	if e.call("GET", "/v1/leases/"+ls.LeaseID, clientTok, nil, &st); st.State != "held" {
		t.Errorf("200 ms after the refused renew the lease is %q, want held", st.State)
	}
	// -1 is no bound: the acquire waits until the holder lets go.
	done := make(chan int, 1)
	go func() {
		code, _ := e.call("POST", "/v1/locks/renewed/acquire", clientTok, `{"wait_ms":-1,"ttl_ms":5000}`, nil)
		done <- code
	}()
	time.Sleep(100 * time.Millisecond)
	if code, _ := e.call("DELETE", "/v1/leases/"+ls.LeaseID, clientTok, nil, nil); code != 204 {
		t.Fatalf("release: %d", code)
	}
	select {
	case code := <-done:
		if code != 200 {
			t.Errorf("wait_ms -1: %d, want 200 once the holder released", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wait_ms -1 did not end 10 s after the holder released")
	}
}
