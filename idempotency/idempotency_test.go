package idempotency_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/idempotency"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
)

func setup(t *testing.T) (*idempotency.Store, *pgxpool.Pool, string) {
	t.Helper()
	return setupWith(t, idempotency.Config{})
}

// setupWith makes a Store configured by cfg on a fresh database.
func setupWith(t *testing.T, cfg idempotency.Config) (*idempotency.Store, *pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	url := testserver.Postgres(t).NewDatabase(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := cfg.Store(pool)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // Migrate is idempotent
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (key text, pid int)`); err != nil {
		t.Fatal(err)
	}
	return s, pool, url
}

func testReplay(t *testing.T) {
	s, _, _ := setup(t)
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return []byte("r1"), nil }
	for i := range 3 {
		res, err := s.Do(ctx, "k", fn)
		if err != nil || string(res) != "r1" {
			t.Fatalf("call %d: %q, %v", i, res, err)
		}
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times, want 1", runs)
	}
	if res, err := s.Do(ctx, "other", fn); err != nil || runs != 2 || string(res) != "r1" {
		t.Fatalf("another key: %q %v, runs %d", res, err, runs)
	}
}

func testEmptyResult(t *testing.T) {
	s, _, _ := setup(t)
	for range 2 {
		res, err := s.Do(context.Background(), "k", func(context.Context) ([]byte, error) { return nil, nil })
		if err != nil || res == nil || len(res) != 0 {
			t.Fatalf("%v, %v", res, err)
		}
	}
}

func testFailureReleases(t *testing.T) {
	s, _, _ := setup(t)
	ctx := context.Background()
	boom := errors.New("card declined")
	if _, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("first call: %v", err)
	}
	res, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(res) != "ok" {
		t.Fatalf("retry after a failure: %q, %v (the key should have been released)", res, err)
	}
}

func testPanicReleases(t *testing.T) {
	s, _, _ := setup(t)
	func() {
		defer func() { _ = recover() }()
		_, _ = s.Do(context.Background(), "k", func(context.Context) ([]byte, error) { panic("x") })
	}()
	if _, err := s.Do(context.Background(), "k", func(context.Context) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}

func testInProgressInProcess(t *testing.T) {
	s, _, _ := setupWith(t, idempotency.Config{Owner: "first"})
	ctx := context.Background()
	started, finish := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = s.Do(ctx, "k", func(context.Context) ([]byte, error) { close(started); <-finish; return []byte("v"), nil })
	})
	<-started
	_, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { t.Error("duplicate ran"); return nil, nil })
	var ip *idempotency.InProgressError
	if !errors.As(err, &ip) || !errors.Is(err, idempotency.ErrInProgress) || ip.Owner != "first" || ip.Since.IsZero() {
		t.Fatalf("duplicate: %v", err)
	}
	close(finish)
	wg.Wait()
}

func testWaitGetsResult(t *testing.T) {
	s, pool, _ := setup(t)
	waiter, err := idempotency.Config{Wait: time.Minute}.Store(pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = s.Do(ctx, "k", func(context.Context) ([]byte, error) {
			close(started)
			time.Sleep(300 * time.Millisecond)
			return []byte("v"), nil
		})
	})
	<-started
	res, err := waiter.Do(ctx, "k", func(context.Context) ([]byte, error) { return []byte("dup"), nil })
	wg.Wait()
	if err != nil || string(res) != "v" {
		t.Fatalf("waiter: %q, %v; want the first call's result", res, err)
	}
}

func testWaitBounded(t *testing.T) {
	s, pool, _ := setup(t)
	waiter, _ := idempotency.Config{Wait: 200 * time.Millisecond}.Store(pool)
	ctx := context.Background()
	started, finish := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = s.Do(ctx, "k", func(context.Context) ([]byte, error) { close(started); <-finish; return nil, nil })
	})
	<-started
	_, err := waiter.Do(ctx, "k", func(context.Context) ([]byte, error) { return nil, nil })
	close(finish)
	wg.Wait()
	if !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("bounded wait: %v", err)
	}
}

// An abandoned claim (the process died) is taken over once it expires.
func testAbandonedClaim(t *testing.T) {
	s, pool, _ := setupWith(t, idempotency.Config{ClaimTTL: time.Second})
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO dlock_idempotency (key, state, token, owner, started_at, expires_at)
		VALUES ('k', 'running', 'dead', 'crashed/1', now(), now() + interval '300 milliseconds')`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { return nil, nil }); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("before expiry: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	if res, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { return []byte("retaken"), nil }); err != nil || string(res) != "retaken" {
		t.Fatalf("after expiry: %q %v", res, err)
	}
}

// testClaimLost: a call whose claim lapsed (as under a pause longer than
// the claim TTL) and was taken over does not overwrite the new result, and
// says so with ErrClaimLost; its fn's context is canceled.
func testClaimLost(t *testing.T) {
	s, pool, _ := setupWith(t, idempotency.Config{ClaimTTL: 600 * time.Millisecond})
	ctx := context.Background()
	started, finish := make(chan struct{}), make(chan struct{})
	var firstErr, cause error
	var wg sync.WaitGroup
	wg.Go(func() {
		_, firstErr = s.Do(ctx, "k", func(ctx context.Context) ([]byte, error) {
			close(started)
			<-finish
			cause = context.Cause(ctx)
			return []byte("first"), nil
		})
	})
	<-started
	// The pause: the claim lapses behind the first call's back.
	if _, err := pool.Exec(ctx, `UPDATE dlock_idempotency SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	res, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { return []byte("second"), nil })
	if err != nil || string(res) != "second" {
		t.Fatalf("takeover: %q %v", res, err)
	}
	time.Sleep(time.Second) // a heartbeat notices
	close(finish)
	wg.Wait()
	if !errors.Is(firstErr, idempotency.ErrClaimLost) || !errors.Is(cause, idempotency.ErrClaimLost) {
		t.Fatalf("first call: err %v, fn's context cause %v; want ErrClaimLost for both", firstErr, cause)
	}
	third := func(context.Context) ([]byte, error) { return []byte("third"), nil }
	if res, err := s.Do(ctx, "k", third); err != nil || string(res) != "second" {
		t.Fatalf("stored result %q %v, want the second call's", res, err)
	}
}

// The heartbeat keeps a claim alive through work far longer than its TTL.
func testHeartbeat(t *testing.T) {
	s, _, _ := setupWith(t, idempotency.Config{ClaimTTL: time.Second})
	ctx := context.Background()
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := s.Do(ctx, "k", func(ctx context.Context) ([]byte, error) {
			close(started)
			time.Sleep(4 * time.Second)
			return nil, context.Cause(ctx)
		})
		if err != nil {
			t.Errorf("long call: %v", err)
		}
	})
	<-started
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.Do(ctx, "k", func(context.Context) ([]byte, error) { t.Error("duplicate ran"); return nil, nil }); !errors.Is(err, idempotency.ErrInProgress) {
			t.Errorf("during the long call: %v", err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
}

func testRetentionAndPurge(t *testing.T) {
	s, _, _ := setupWith(t, idempotency.Config{Retention: 200 * time.Millisecond})
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(context.Context) ([]byte, error) { runs.Add(1); return nil, nil }
	for _, k := range []string{"a", "b"} {
		if _, err := s.Do(ctx, k, fn); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("purge before expiry: %d %v", n, err)
	}
	time.Sleep(300 * time.Millisecond)
	if n, err := s.Purge(ctx); err != nil || n != 2 {
		t.Fatalf("purge after expiry: %d %v, want 2", n, err)
	}
	if _, err := s.Do(ctx, "a", fn); err != nil || runs.Load() != 3 {
		t.Fatalf("after retention: runs %d, %v; want fn to run again", runs.Load(), err)
	}
}

func testDoJSON(t *testing.T) {
	s, _, _ := setup(t)
	type receipt struct {
		ID     string
		Amount int
	}
	ctx := context.Background()
	for i := range 2 {
		r, err := idempotency.DoJSON(ctx, s, "k", func(context.Context) (receipt, error) { return receipt{"ch_1", 100 + i}, nil })
		if err != nil || r != (receipt{"ch_1", 100}) {
			t.Fatalf("call %d: %+v %v", i, r, err)
		}
	}
}

func testInvalid(t *testing.T) {
	s, _, _ := setup(t)
	ctx := context.Background()
	fn := func(context.Context) ([]byte, error) { return nil, nil }
	_, errKey := s.Do(ctx, "", fn)
	_, errFn := s.Do(ctx, "k", nil)
	_, errNil := idempotency.New(nil)
	for name, err := range map[string]error{"key": errKey, "fn": errFn, "db": errNil} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	// Each invalid field is named, with its value, in the error.
	for _, tc := range []struct {
		cfg  idempotency.Config
		want string
	}{
		{idempotency.Config{Retention: -time.Second}, "Config.Retention -1s"},
		{idempotency.Config{Retention: time.Microsecond}, "Config.Retention 1µs"},
		{idempotency.Config{ClaimTTL: 10 * time.Millisecond}, "Config.ClaimTTL 10ms"},
		{idempotency.Config{Table: "a..b"}, `Config.Table "a..b"`},
		{idempotency.Config{Wait: -1}, "Config.Wait -1ns"},
		{idempotency.Config{Owner: strings.Repeat("o", 257)}, "Config.Owner"},
	} {
		_, err := tc.cfg.Store(&pgxpool.Pool{})
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Store = %v, want ErrInvalidArgument naming %s", tc.cfg, err, tc.want)
		}
	}
	// Zero fields are the defaults, not errors.
	if _, err := (idempotency.Config{}).Store(&pgxpool.Pool{}); err != nil {
		t.Errorf("Config{}.Store = %v, want the defaults", err)
	}
}

// testDuplicateProcesses starts separate OS processes calling Do with the
// same key at the same moment: the effect happens once, every process that
// gets an answer gets the same one, and the others are told "in progress"
// (or, waiting, get the answer too).
func testDuplicateProcesses(t *testing.T) {
	for _, wait := range []time.Duration{0, time.Minute} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			_, pool, url := setup(t)
			outs := runChildren(t, 6, childSpec{URL: url, Key: "charge/sub-1/2026-12", Wait: wait, Work: time.Second})
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM effects`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("effects: %d (%v), want exactly 1; outputs %q", n, err, outs)
			}
			checkOutputs(t, outs, wait > 0)
		})
	}
}

func checkOutputs(t *testing.T, outs []string, waited bool) {
	t.Helper()
	t.Logf("outputs: %q", outs)
	ran, receipt := 0, ""
	for _, o := range outs {
		verb, res, _ := strings.Cut(o, " ")
		switch {
		case verb == "inprogress" && !waited:
			continue
		case verb == "ran":
			ran++
		case verb != "replayed":
			t.Fatalf("unexpected child output %q", o)
		}
		if receipt != "" && res != receipt {
			t.Fatalf("two different results: %q and %q", receipt, res)
		}
		receipt = res
	}
	if ran != 1 {
		t.Fatalf("%d children ran fn, want 1", ran)
	}
}

func runChildren(t *testing.T, n int, spec childSpec) []string {
	raw, _ := json.Marshal(spec)
	type child struct {
		cmd   *exec.Cmd
		stdin interface{ Close() error }
		out   *bufio.Scanner
	}
	kids := make([]child, n)
	for i := range kids {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+string(raw))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		kids[i] = child{cmd, stdin, bufio.NewScanner(stdout)}
	}
	time.Sleep(time.Second) // let every child connect before the start gun
	for _, k := range kids {
		k.stdin.Close()
	}
	outs := make([]string, n)
	for i, k := range kids {
		if k.out.Scan() {
			outs[i] = k.out.Text()
		}
		if err := k.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	return outs
}

// TestStore runs every test as a subtest, so that they share one PostgreSQL
// server (testserver.Postgres keeps it while a user is running).
func TestStore(t *testing.T) {
	testserver.Postgres(t)
	t.Run("Replay", testReplay)
	t.Run("EmptyResult", testEmptyResult)
	t.Run("FailureReleases", testFailureReleases)
	t.Run("PanicReleases", testPanicReleases)
	t.Run("InProgressInProcess", testInProgressInProcess)
	t.Run("WaitGetsResult", testWaitGetsResult)
	t.Run("WaitBounded", testWaitBounded)
	t.Run("AbandonedClaim", testAbandonedClaim)
	t.Run("Heartbeat", testHeartbeat)
	t.Run("ClaimLost", testClaimLost)
	t.Run("RetentionAndPurge", testRetentionAndPurge)
	t.Run("DoJSON", testDoJSON)
	t.Run("Invalid", testInvalid)
	t.Run("DuplicateProcesses", testDuplicateProcesses)
}
