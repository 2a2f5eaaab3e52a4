package filelock

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// BenchmarkPollCost: one tick of the release watcher when nothing was
// released (the usual case) on a table of 1,000 names, against PRAGMA
// data_version (the other cheap change detector SQLite offers, which also
// needs a pinned connection and a second query when it changes).
func BenchmarkPollCost(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "x.db")
	d, err := openDriver(ctx, path, Config{Sync: SyncNormal, Retention: DefaultRetention})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for i := range 1000 {
		name := fmt.Sprint("n", i)
		_, _ = d.TryAcquire(ctx, driver.Request{Name: name, Token: "t", Owner: "o", TTL: time.Minute})
		_ = d.Release(ctx, name, "t")
	}
	db, err := openDB(path, SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.Run("freed-query", func(b *testing.B) { benchQuery(b, db, freedSQL, 1000) })
	b.Run("data_version", func(b *testing.B) { benchQuery(b, db, "PRAGMA data_version") })
}

func benchQuery(b *testing.B, db *sql.DB, query string, args ...any) {
	ctx := context.Background()
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for b.Loop() {
		rows, err := st.QueryContext(ctx, args...)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
