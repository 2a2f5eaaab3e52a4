package redlock

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// syncBuf is a log destination that go-redis's goroutines may write while
// the test reads it.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGoRedisLogsFollowLocker: with every node down, go-redis's own lines
// ("failed to dial after N attempts") go to the logger the Locker was
// given (dlock.WithLogger), not to slog.Default.
func TestGoRedisLogsFollowLocker(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var def, mine syncBuf
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var clients []redis.UniversalClient
	t.Cleanup(waitDialRetries) // runs after the clients' Close
	for range 3 {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)), DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	l, err := New(clients, dlock.WithLogger(slog.New(slog.NewTextHandler(&mine, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(mine.String(), "failed to dial"); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if _, err := l.TryAcquire(ctx, "dead/nodes"); err == nil {
			t.Fatal("TryAcquire with every node down succeeded")
		}
		cancel()
	}
	if got := mine.String(); !strings.Contains(got, "failed to dial") || !strings.Contains(got, "component=go-redis") {
		t.Errorf("the Locker's logger has no go-redis dial line:\n%s", got)
	}
	if strings.Contains(def.String(), "failed to dial") {
		t.Errorf("slog.Default got go-redis's line:\n%s", def.String())
	}
}

// waitDialRetries waits (up to 5 s) for go-redis's background re-dials of
// closed clients to notice the Close: they sleep a second between tries,
// and would otherwise be reported as leaked when this test runs alone.
func waitDialRetries() {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "pool.(*ConnPool).tryDial") {
			return
		}
	}
}
