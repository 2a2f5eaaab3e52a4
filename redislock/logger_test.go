package redislock_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// logBuf is a log destination that go-redis's goroutines may write while
// the test reads it.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logger logs everything, Debug included, to b.
func (b *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// captureDefault makes slog.Default log to a buffer until t ends.
func captureDefault(t *testing.T) *logBuf {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var b logBuf
	slog.SetDefault(b.logger())
	return &b
}

// TestGoRedisLogsFollowLocker: go-redis's own lines about a dead server
// ("failed to dial after N attempts") go to the logger the Locker was
// given (dlock.WithLogger), never to slog.Default nor standard error, and
// never show the client's password.
func TestGoRedisLogsFollowLocker(t *testing.T) {
	const secret = "s3cr3t-Pa55word"
	def := captureDefault(t)
	var mine logBuf
	dead := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	c := redis.NewClient(&redis.Options{Addr: dead, Password: secret, ContextTimeoutEnabled: true, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	l, err := redislock.New(c, dlock.WithLogger(mine.logger()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := l.TryAcquire(ctx, "dead/server"); err == nil {
		t.Fatal("TryAcquire on a dead server succeeded")
	}
	got := mine.String()
	if !strings.Contains(got, "failed to dial") || !strings.Contains(got, "component=go-redis") {
		t.Errorf("the Locker's logger has no go-redis dial line:\n%s", got)
	}
	if strings.Contains(def.String(), "failed to dial") {
		t.Errorf("slog.Default got go-redis's line:\n%s", def.String())
	}
	if strings.Contains(got+def.String(), secret) {
		t.Errorf("a log line shows the password")
	}
}

// TestPersistenceWarningToLocker: the "appendonly is off" warning goes to
// the logger of dlock.WithLogger, for New and dlock.Open alike, and not
// to slog.Default; Config.Logger wins over the Locker's logger.
func TestPersistenceWarningToLocker(t *testing.T) {
	def := captureDefault(t)
	ctx := ctxT(t)
	open := map[string]func(srv *testserver.RedisServer, log *slog.Logger) (*dlock.Locker, error){
		"New": func(srv *testserver.RedisServer, log *slog.Logger) (*dlock.Locker, error) {
			return redislock.New(client(t, srv.Addr), dlock.WithLogger(log))
		},
		"Open": func(srv *testserver.RedisServer, log *slog.Logger) (*dlock.Locker, error) {
			return dlock.Open(ctx, srv.URL(), dlock.WithLogger(log))
		},
	}
	for name, open := range open {
		var mine logBuf
		l, err := open(testserver.Redis(t), mine.logger())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = l.Close()
		if !strings.Contains(mine.String(), "appendonly is off") {
			t.Errorf("%s: the Locker's logger has no persistence warning:\n%s", name, mine.String())
		}
	}
	var cfgLog, lockerLog logBuf
	cfg := redislock.Config{Logger: cfgLog.logger()}
	l, err := cfg.Locker(client(t, testserver.Redis(t).Addr), dlock.WithLogger(lockerLog.logger()))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if !strings.Contains(cfgLog.String(), "appendonly is off") || strings.Contains(lockerLog.String(), "appendonly") {
		t.Errorf("Config.Logger got %q, the Locker's logger %q; want the warning in Config.Logger only", cfgLog.String(), lockerLog.String())
	}
	if strings.Contains(def.String(), "appendonly") {
		t.Errorf("slog.Default got the warning:\n%s", def.String())
	}
}
