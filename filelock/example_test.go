package filelock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/filelock"
)

// Two Lockers on one file contend as two processes on the host would.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "dlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "dlock.db")

	ctx := context.Background()
	a, err := filelock.New(path, dlock.WithOwner("alice"))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := filelock.New(path, dlock.WithOwner("bob"))
	if err != nil {
		panic(err)
	}
	defer b.Close()

	first, err := a.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	fmt.Println("alice acquired")
	_, err = b.TryAcquire(ctx, "nightly-report")
	var held *dlock.HeldError
	if errors.As(err, &held) {
		fmt.Println("bob: held by", held.Owner)
	}
	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	second, err := b.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	defer second.Release(ctx)
	fmt.Println("bob acquired, fence increased:", second.Fence() > first.Fence())
	// Output:
	// alice acquired
	// bob: held by alice
	// bob acquired, fence increased: true
}

// Config.Locker with Sync full syncs every grant to disk, so that no fence
// is handed out twice even across a power cut.
func ExampleConfig_Locker() {
	dir, err := os.MkdirTemp("", "dlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	locker, err := filelock.Config{Sync: filelock.SyncFull}.Locker(filepath.Join(dir, "dlock.db"), dlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	lease, err := locker.TryAcquire(ctx, "migrate")
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	fmt.Println("acquired, fence", lease.Fence())
	// Output:
	// acquired, fence 1
}

// NewDB keeps the locks in the caller's own SQLite database, beside its
// data; the DSN gives it what New gives its own connection.
func ExampleNewDB() {
	dir, err := os.MkdirTemp("", "dlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := sql.Open("sqlite", "file://"+filepath.Join(dir, "app.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	ctx := context.Background()
	locker, err := filelock.NewDB(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	lease, err := locker.TryAcquire(ctx, "import")
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	fmt.Println("acquired")
	// Output:
	// acquired
}
