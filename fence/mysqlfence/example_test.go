package mysqlfence_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/mysqlfence"
	_ "github.com/go-sql-driver/mysql"
)

// Fence a balance update, and watch a writer whose grant was superseded
// be refused twice: by the fenced write, and by the trigger when it
// forgets the fence's WHERE clause. (It needs a server: set MYSQL_DSN.
// TestExample runs it against a test MariaDB.)
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", cmp.Or(os.Getenv("MYSQL_DSN"), "root@tcp(localhost:3306)/bank"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// Once, in a migration: the table, and the trigger that rejects lower
	// fences even from code that forgets the WHERE clause.
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS accounts
		(id INT PRIMARY KEY, fence BIGINT UNSIGNED NOT NULL, balance INT) ENGINE=InnoDB`); err != nil {
		log.Fatal(err)
	}
	if err := mysqlfence.InstallTrigger(ctx, db, "accounts", "fence"); err != nil {
		log.Fatal(err)
	}
	accounts := mysqlfence.Table{Name: "accounts", Key: "id"}

	// B holds the lock with fence 34 (lease.Fence()) and writes.
	fmt.Println(accounts.Upsert(ctx, db, 42, 34, mysqlfence.Values{"balance": 100}))
	// A held it before with fence 33, was paused past its TTL, and resumes.
	err = accounts.Update(ctx, db, 42, 33, mysqlfence.Values{"balance": 0})
	fmt.Println(errors.Is(err, fence.ErrStale), err)
	// A again, with a plain UPDATE: the trigger refuses it.
	_, err = db.ExecContext(ctx, `UPDATE accounts SET balance = 0, fence = 33 WHERE id = 42`)
	fmt.Println(mysqlfence.MapError(err))

	var balance int
	if err := db.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 42`).Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println(balance)
}
