package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/idempotency"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envChild holds a childSpec when the test binary runs as a child.
const envChild = "IDEMPOTENCY_TEST_CHILD"

func TestMain(m *testing.M) {
	if raw := os.Getenv(envChild); raw != "" {
		os.Exit(childMain(raw))
	}
	dlocktest.Main(testserver.KeepShared(m))
}

// childSpec: call Do(Key) once, after stdin reaches EOF (the start gun);
// fn records its effect in the effects table and takes Work.
type childSpec struct {
	URL  string
	Key  string
	Wait time.Duration
	Work time.Duration
}

func childMain(raw string) int {
	var c childSpec
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	out, err := c.run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println(out)
	return 0
}

func (c childSpec) run() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, c.URL)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	store, err := idempotency.Config{Wait: c.Wait, Owner: fmt.Sprintf("child/%d", os.Getpid())}.Store(pool)
	if err != nil {
		return "", err
	}
	if err := pool.Ping(ctx); err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	ran := false
	res, err := store.Do(ctx, c.Key, func(ctx context.Context) ([]byte, error) {
		ran = true
		if _, err := pool.Exec(ctx, `INSERT INTO effects (key, pid) VALUES ($1, $2)`, c.Key, os.Getpid()); err != nil {
			return nil, err
		}
		time.Sleep(c.Work)
		return fmt.Appendf(nil, "receipt-from-%d", os.Getpid()), nil
	})
	switch {
	case errors.Is(err, idempotency.ErrInProgress):
		return "inprogress", nil
	case err != nil:
		return "", err
	case ran:
		return "ran " + string(res), nil
	}
	return "replayed " + string(res), nil
}
