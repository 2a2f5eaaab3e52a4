package pglock_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// docGrants returns the GRANT statements of docs/postgres.md's
// Privileges section, for the role given instead of "app".
func docGrants(t *testing.T, role string) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Privileges\n")
	_, block, ok2 := strings.Cut(section, "```sql\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/postgres.md has no ```sql block under ## Privileges")
	}
	var stmts []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "GRANT ") {
			stmts = append(stmts, strings.Replace(line, " TO app;", " TO "+role, 1))
		}
	}
	if len(stmts) == 0 {
		t.Fatal("no GRANT in docs/postgres.md's Privileges block")
	}
	return stmts
}

// TestGrantsSuffice: a role given only the GRANTs of docs/postgres.md
// (no ownership, no DDL) can make every call of both modes: grant and
// release, a contended wait, List, Inspect, ForceRelease, and RunOnce
// (claim, outcome, trim) and Runs.
func TestGrantsSuffice(t *testing.T) {
	srv := testserver.Postgres(t)
	d := newDB(t)
	db := d.url[strings.LastIndex(d.url, "/")+1 : strings.Index(d.url, "?")]
	for _, g := range docGrants(t, "dlock_auth") {
		d.exec(t, g)
	}
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			l, err := cfg.Locker(newPool(t, srv.AuthURL(db, srv.Password)), dlock.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			asRole(t, l)
		})
	}
}

// asRole makes every call of a Locker once, failing t on any error.
func asRole(t *testing.T, l *dlock.Locker) {
	t.Helper()
	c := ctx(t)
	held, err := l.Acquire(c, "granted")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	waited := make(chan error, 1)
	go func() {
		ls, err := l.Acquire(c, "granted", dlock.WithWait(time.Minute))
		if err == nil {
			err = ls.Release(c)
		}
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it queue
	if err := held.Release(c); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("contended Acquire: %v", err)
	}
	if _, err := l.List(c, ""); err != nil {
		t.Errorf("List: %v", err)
	}
	if _, _, err := l.Inspect(c, "granted"); err != nil {
		t.Errorf("Inspect: %v", err)
	}
	victim, err := l.Acquire(c, "evicted")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, ok, _, err := l.ForceRelease(c, "evicted"); err != nil || !ok {
		t.Errorf("ForceRelease = %v, %v", ok, err)
	}
	<-victim.Done()
	for m := range 3 {
		slot := dlock.Slot{Time: minute(m), Schedule: "every 1m0s"}
		if _, err := l.RunOnce(c, "granted-job", slot, func(context.Context, *dlock.Lease) error { return nil },
			dlock.WithKeepRuns(2)); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
	}
	runs, err := l.Runs(c, "granted-job")
	if err != nil || len(runs) != 2 {
		t.Errorf("Runs = %v, %v; want the newest 2", runs, err)
	}
}
