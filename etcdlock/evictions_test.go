package etcdlock_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestForceReleasePushed: an administrator's ForceRelease reaches the
// evicted holder through its Locker's eviction watch, long before the
// refresh a third of its 60 s TTL later would tell it, and says
// force-released; the holder's other lease stays held.
func TestForceReleasePushed(t *testing.T) {
	srv := testserver.Etcd(t)
	holder, admin := locker(t, srv.Endpoint), locker(t, srv.Endpoint)
	ctx := context.Background()
	ls, err := holder.Acquire(ctx, "pushed", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer func() { _ = ls.Release(ctx) }()
	other, err := holder.Acquire(ctx, "kept", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer func() { _ = other.Release(ctx) }()
	waitWatchers(t, srv.Endpoint, 1) // the Locker subscribes in the background

	evicted, ok, _, err := admin.ForceRelease(ctx, "pushed")
	if err != nil || !ok || evicted.Fence != ls.Fence() {
		t.Fatalf("ForceRelease = %+v, ok %v, err %v; want the holder (fence %d) evicted", evicted, ok, err, ls.Fence())
	}
	// Without the push, the holder learns at its first refresh, 20 s on.
	select {
	case <-ls.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted holder was not told within 10 s")
	}
	var le *dlock.LostError
	if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostForceReleased {
		t.Errorf("evicted holder's Err = %v, want a LostError saying %q", ls.Err(), dlock.LostForceReleased)
	}
	if err := other.Err(); err != nil {
		t.Errorf("the holder's other lease ended too: %v", err)
	}
}

// TestEvictionRecordsHidden: the eviction record ForceRelease leaves under
// the prefix is no lock: List does not show it, and a lock whose name looks
// like its directory is unaffected.
func TestEvictionRecordsHidden(t *testing.T) {
	srv := testserver.Etcd(t)
	l := locker(t, srv.Endpoint)
	ctx := context.Background()
	look := "%evicted"
	lookalike, err := l.TryAcquire(ctx, look)
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", look, err)
	}
	defer func() { _ = lookalike.Release(ctx) }()
	ls, err := l.TryAcquire(ctx, "victim")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, ok, _, err := l.ForceRelease(ctx, "victim"); err != nil || !ok {
		t.Fatalf("ForceRelease = ok %v, err %v", ok, err)
	}
	<-ls.Done()
	hs, err := l.List(ctx, "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(hs) != 1 || hs[0].Name != look || hs[0].Fence != lookalike.Fence() {
		t.Errorf("List = %+v, want only %q (fence %d)", hs, look, lookalike.Fence())
	}
	if err := lookalike.Err(); err != nil {
		t.Errorf("lease of %q ended: %v", look, err)
	}
}

// waitWatchers waits until the etcd server at endpoint has at least n
// watchers (its etcd_debugging_mvcc_watcher_total metric).
func waitWatchers(t *testing.T, endpoint string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := watchers(endpoint)
		switch {
		case err == nil && got >= n:
			return
		case time.Now().After(deadline):
			t.Fatalf("etcd has %d watchers (err %v), want %d", got, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func watchers(endpoint string) (int, error) {
	resp, err := http.Get("http://" + endpoint + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_mvcc_watcher_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, errors.New("no etcd_debugging_mvcc_watcher_total in /metrics")
}
