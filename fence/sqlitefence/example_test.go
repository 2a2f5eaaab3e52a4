package sqlitefence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
	_ "modernc.org/sqlite"
)

func Example() {
	ctx := context.Background()
	db, _ := sql.Open("sqlite", "file:example?mode=memory")
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	db.Exec(`CREATE TABLE reports (name TEXT PRIMARY KEY, fence INTEGER NOT NULL, body TEXT)`)
	reports := sqlitefence.Table{Name: "reports", Key: "name"}

	// B holds the lock with fence 34 and writes twice under that grant.
	fmt.Println(reports.Upsert(ctx, db, "daily", 34, sqlitefence.Values{"body": "B: draft"}))
	fmt.Println(reports.Upsert(ctx, db, "daily", 34, sqlitefence.Values{"body": "B: final"}))
	// A held it before (fence 33), was paused past its TTL, and resumes.
	err := reports.Upsert(ctx, db, "daily", 33, sqlitefence.Values{"body": "A: stale"})
	fmt.Println(errors.Is(err, fence.ErrStale), err)

	var body string
	db.QueryRow(`SELECT body FROM reports WHERE name = 'daily'`).Scan(&body)
	fmt.Println(body)
	// Output:
	// <nil>
	// <nil>
	// true fence: write to "reports[daily]" with fence 33 rejected: fence 34 has written since
	// B: final
}
