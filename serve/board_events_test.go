package serve_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// dashboardView is the part of GET /v1/dashboard these tests read.
type dashboardView struct {
	CanForceRelease bool `json:"can_force_release"`
	Events          []struct {
		Type   string `json:"type"`
		Name   string `json:"name"`
		Fence  uint64 `json:"fence"`
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	} `json:"events"`
}

// endsOf returns the dashboard's events for name other than its grants,
// once there is one (or after 10 s, none).
func endsOf(t *testing.T, e *env, name string) dashboardView {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var v dashboardView
		if code, _ := e.call("GET", "/v1/dashboard", clientTok, nil, &v); code != 200 {
			t.Fatalf("GET /v1/dashboard: %d", code)
		}
		ends := v.Events[:0]
		for _, ev := range v.Events {
			if ev.Name == name && ev.Type != "granted" {
				ends = append(ends, ev)
			}
		}
		v.Events = ends
		if len(ends) > 0 || time.Now().After(deadline) {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDashboardTellsForceReleases: a lease of the server force-released
// by another process (another Locker on the backend, as dlock release
// --force is) is on the dashboard as force-released from outside this
// server, not as a bare loss; one force-released through the server's
// admin endpoint is one event that says so. Only an admin's view offers
// force-release.
func TestDashboardTellsForceReleases(t *testing.T) {
	for name, url := range withFile(t, backends(t)) {
		t.Run(name, func(t *testing.T) {
			u := url()
			e := newEnv(t, u, nil)
			elsewhere := openLocker(t, u)
			out := e.acquire("outside", map[string]any{"ttl_ms": 30000})
			awaitEvictionWatch(t, u, e.locker.Settings()["prefix"])
			if _, ok, _, err := elsewhere.ForceRelease(context.Background(), "outside"); err != nil || !ok {
				t.Fatalf("force-release from another Locker: evicted %v, %v", ok, err)
			}
			v := endsOf(t, e, "outside")
			if len(v.Events) != 1 || v.Events[0].Type != "force-released" || v.Events[0].Fence != out.Fence ||
				!strings.Contains(v.Events[0].Reason, "outside this server") || !strings.Contains(v.Events[0].Detail, "force-released") {
				t.Errorf("after a force-release by another process the dashboard has %+v, want one force-released event of fence %d from outside this server", v.Events, out.Fence)
			}
			in := e.acquire("inside", map[string]any{"ttl_ms": 30000})
			if code, _ := e.call("POST", "/v1/locks/inside/force-release", adminTok, map[string]any{}, nil); code != 200 {
				t.Fatalf("force-release through the server: %d", code)
			}
			v = endsOf(t, e, "inside")
			if len(v.Events) != 1 || v.Events[0].Type != "force-released" || v.Events[0].Fence != in.Fence ||
				!strings.HasPrefix(v.Events[0].Reason, "through this server") {
				t.Errorf("after a force-release through the server the dashboard has %+v, want one force-released event of fence %d through this server", v.Events, in.Fence)
			}
			if v.CanForceRelease {
				t.Error("a client's dashboard view offers force-release")
			}
			var admin dashboardView
			if e.call("GET", "/v1/dashboard", adminTok, nil, &admin); !admin.CanForceRelease {
				t.Error("an admin's dashboard view does not offer force-release")
			}
		})
	}
}

// awaitEvictionWatch waits, on Redis, until the server's Locker listens
// for the evictions other processes publish: it subscribes when its
// first lease is granted, and a force-release published before that is
// heard by no one (the lease is then lost as expired, at its next
// refresh). Other backends need no wait.
func awaitEvictionWatch(t *testing.T, url, prefix string) {
	t.Helper()
	if !strings.HasPrefix(url, "redis://") {
		return
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	channel := prefix + "evicted"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n := rdb.PubSubNumSub(context.Background(), channel).Val()[channel]; n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's Locker did not subscribe to %s within 10 s", channel)
		}
	}
}
