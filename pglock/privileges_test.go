package pglock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestPermissionDeniedNamesGrants: a role without privileges on the
// mode's objects is told the GRANT statements it needs; run as the owner,
// those statements (and nothing else) let the role make every call.
func TestPermissionDeniedNamesGrants(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			d := newDB(t)
			db := d.url[strings.LastIndex(d.url, "/")+1 : strings.Index(d.url, "?")]
			l, err := cfg.Locker(newPool(t, srv.AuthURL(db, srv.Password)), dlock.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, err = l.TryAcquire(ctx(t), "granted")
			if err == nil {
				t.Fatal("TryAcquire succeeded without privileges")
			}
			if !errors.Is(err, driver.ErrPermanent) || !strings.Contains(err.Error(), "permission denied") {
				t.Fatalf("TryAcquire: %v, want permission denied", err)
			}
			_, stmts, ok := strings.Cut(err.Error(), "run: ")
			stmts, _, _ = strings.Cut(stmts, " (docs/postgres.md")
			if !ok || !strings.HasPrefix(stmts, "GRANT ") {
				t.Fatalf("TryAcquire: %v\nwant the GRANT statements the role needs", err)
			}
			t.Logf("TryAcquire: %v", err)
			for _, s := range strings.SplitAfter(stmts, ";") {
				if s = strings.TrimSpace(s); s != "" {
					d.exec(t, s)
				}
			}
			asRole(t, l)
		})
	}
}
