package mysqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/mysqlfence"
)

// writer is one form of fenced write, run in tx or, when tx is nil, in db.
type writer func(ctx context.Context, db *sql.DB, tx *sql.Tx, f uint64, body string) error

var forms = map[string]writer{
	"Update": func(ctx context.Context, db *sql.DB, tx *sql.Tx, f uint64, body string) error {
		if tx != nil {
			return docs.Update(ctx, tx, "x", f, mysqlfence.Values{"body": body})
		}
		return docs.Update(ctx, db, "x", f, mysqlfence.Values{"body": body})
	},
	"Trigger": func(ctx context.Context, db *sql.DB, tx *sql.Tx, f uint64, body string) error {
		q, args := `UPDATE docs SET body = ?, fence = ? WHERE id = 'x'`, []any{body, f}
		var err error
		if tx != nil {
			_, err = tx.ExecContext(ctx, q, args...)
		} else {
			_, err = db.ExecContext(ctx, q, args...)
		}
		return mysqlfence.MapError(err)
	},
}

// testContention: a writer holds the row in an open transaction while a
// second writer, on another connection, writes with another fence and
// blocks on InnoDB's row lock. When the first commits, the second goes
// on against the committed row: a stale fence is rejected after a fresh
// one, a fresh fence applied after a stale one.
func testContention(t *testing.T) {
	for name, write := range forms {
		t.Run(name+"/StaleWaitsForFresh", func(t *testing.T) { contend(t, write, name == "Trigger", 34, 33) })
		t.Run(name+"/FreshWaitsForStale", func(t *testing.T) { contend(t, write, name == "Trigger", 33, 34) })
	}
}

func contend(t *testing.T, write writer, trigger bool, first, second uint64) {
	ctx := context.Background()
	db := open(t)
	exec(t, db, `INSERT INTO docs VALUES ('x', 32, 'b32')`)
	if trigger {
		if err := mysqlfence.InstallTrigger(ctx, db, "docs", ""); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := write(ctx, db, tx, first, "first"); err != nil {
		t.Fatalf("first write, fence %d, in its transaction: %v", first, err)
	}
	conn, id := connection(t, db)
	done := make(chan error, 1)
	go func() {
		// A *sql.Conn is a DB too, but the forms take a pool: give it one
		// made of this single connection's session through its own tx.
		done <- inConn(ctx, conn, func(tx *sql.Tx) error { return write(ctx, db, tx, second, "second") })
	}()
	waitForLockWait(t, db, id, done)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if second < first {
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Offered != second || se.Current != first {
			t.Fatalf("write with fence %d after %d committed: %v, want a StaleError %d < %d", second, first, err, second, first)
		}
	} else if err != nil {
		t.Fatalf("write with fence %d after %d committed: %v", second, first, err)
	}
	body, f, _, err := read(db, "x")(ctx)
	want, wantBody := max(first, second), "first"
	if second > first {
		wantBody = "second"
	}
	if err != nil || f != want || body != wantBody {
		t.Fatalf("stored %q with fence %d (%v), want %q with %d", body, f, err, wantBody, want)
	}
}

// connection is one pinned connection of db and its server thread id.
func connection(t *testing.T, db *sql.DB) (*sql.Conn, int64) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var id int64
	if err := conn.QueryRowContext(context.Background(), `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return conn, id
}

// inConn runs fn in a transaction on conn, committed if fn succeeds.
func inConn(ctx context.Context, conn *sql.Conn, fn func(*sql.Tx) error) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// waitForLockWait returns once InnoDB shows connection id waiting for a
// row lock; it fails if the write finishes first (it should have blocked).
func waitForLockWait(t *testing.T, db *sql.DB, id int64, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // a bound far beyond any lock wait's start
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the second write finished while the first held the row: %v", err)
		default:
		}
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`, id).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		// InnoDB serves INNODB_TRX from a cache it refreshes only when
		// the last refresh is over 0.1 s old: poll slower than that.
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the second write never waited for the row lock")
}
