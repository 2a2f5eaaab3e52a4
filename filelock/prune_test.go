package filelock

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func retentionDriver(t *testing.T, retention time.Duration) *fileDriver {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.db")
	d, err := openDriver(context.Background(), path, Config{Sync: SyncNormal, Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func rows(t *testing.T, d *fileDriver) (n int) {
	t.Helper()
	if err := d.db.QueryRow(`SELECT count(*) FROM dlock_leases`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func releaseName(t *testing.T, d *fileDriver, name, token string) {
	t.Helper()
	if err := d.Release(context.Background(), name, token); err != nil {
		t.Fatalf("Release(%s, %s): %v", name, token, err)
	}
}

// TestPruneKeepsFencesIncreasing: after the rows of names nobody holds are
// deleted, a name's next grant (or force-release) still gets a fence above
// every fence it had, and a live lease is left alone.
func TestPruneKeepsFencesIncreasing(t *testing.T) {
	ctx := context.Background()
	d := retentionDriver(t, time.Hour) // no prune during Release here
	grant(t, d, "held", "h", time.Minute)
	var last uint64
	for i := range 3 {
		tok := fmt.Sprint("a", i)
		last = grant(t, d, "a", tok, time.Minute).Fence
		releaseName(t, d, "a", tok)
	}
	gb := grant(t, d, "b", "b0", time.Minute)
	releaseName(t, d, "b", "b0")
	grant(t, d, "c", "c0", time.Minute)
	releaseName(t, d, "c", "c0") // the largest release sequence: kept

	n, err := d.pruneRows(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || rows(t, d) != 2 {
		t.Fatalf("pruned %d rows, %d left; want a and b pruned, held and c left", n, rows(t, d))
	}
	if err := d.Refresh(ctx, "held", "h", time.Minute); err != nil {
		t.Fatalf("live lease after prune: %v", err)
	}
	if g := grant(t, d, "a", "a3", time.Minute); g.Fence <= last {
		t.Fatalf("a's fence after its row was pruned: %d, want above %d", g.Fence, last)
	}
	_, _, f, err := d.ForceRelease(ctx, "b")
	if err != nil || f <= gb.Fence {
		t.Fatalf("ForceRelease(b) after prune: fence %d, %v; want above %d", f, err, gb.Fence)
	}
}

// TestPruneBoundsRows: with a short retention, many distinct names leave
// behind only the row of the last one released.
func TestPruneBoundsRows(t *testing.T) {
	d := retentionDriver(t, time.Millisecond)
	for i := range 300 {
		name := fmt.Sprint("job/", i)
		grant(t, d, name, "t", time.Minute)
		releaseName(t, d, name, "t")
	}
	time.Sleep(10 * time.Millisecond) // every row is now past the retention
	grant(t, d, "last", "t", time.Minute)
	releaseName(t, d, "last", "t")
	if n := rows(t, d); n != 1 {
		t.Fatalf("%d rows after 301 names with a 1ms retention, want 1", n)
	}
	if g := grant(t, d, "job/0", "u", time.Minute); g.Fence < 2 {
		t.Fatalf("job/0 regranted with fence %d, want above its pruned fence 1", g.Fence)
	}
}
