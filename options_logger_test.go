package dlock_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// loggingDriver records the logger it was given and counts migrations.
type loggingDriver struct {
	driver.Driver
	set        *slog.Logger
	atOpen     *slog.Logger
	migrations *atomic.Int64
}

func (d *loggingDriver) SetLogger(l *slog.Logger)          { d.set = l }
func (d *loggingDriver) Migrate(ctx context.Context) error { d.migrations.Add(1); return nil }

var (
	lastLogging   *loggingDriver
	logMigrations atomic.Int64
)

func init() {
	dlock.Register("logtest", func(ctx context.Context, url string) (driver.Driver, error) {
		l, err := memlock.New(memlock.NewStore())
		if err != nil {
			return nil, err
		}
		lastLogging = &loggingDriver{Driver: l.Driver(), atOpen: driver.LoggerFrom(ctx), migrations: &logMigrations}
		return lastLogging, nil
	})
}

// TestWithLogger: the logger reaches the driver's Opener and SetLogger; it
// is a Locker option only; nil is refused.
func TestWithLogger(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	l, err := dlock.Open(t.Context(), "logtest://x", dlock.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if lastLogging.atOpen != logger || lastLogging.set != logger {
		t.Errorf("driver got logger %p at open and %p by SetLogger, want %p for both", lastLogging.atOpen, lastLogging.set, logger)
	}
	_, err = l.TryAcquire(t.Context(), "x", dlock.WithLogger(logger))
	if !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("WithLogger on TryAcquire = %v, want ErrInvalidArgument", err)
	}
	if _, err := dlock.Open(t.Context(), "logtest://x", dlock.WithLogger(nil)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("WithLogger(nil) = %v, want ErrInvalidArgument", err)
	}
	l2, err := dlock.Open(t.Context(), "logtest://x")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if lastLogging.atOpen != slog.Default() || lastLogging.set != nil {
		t.Error("without WithLogger the driver must get slog.Default() at open and no SetLogger call")
	}
}

// TestMigrateAuto: migrate=auto runs the driver's Migrate during Open;
// without it, or with migrate=off, nothing is created; other values are
// invalid.
func TestMigrateAuto(t *testing.T) {
	before := logMigrations.Load()
	for _, u := range []string{"logtest://x", "logtest://x?migrate=off"} {
		l, err := dlock.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	if n := logMigrations.Load() - before; n != 0 {
		t.Fatalf("%d migrations without migrate=auto, want 0", n)
	}
	l, err := dlock.Open(t.Context(), "logtest://x?migrate=auto")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if n := logMigrations.Load() - before; n != 1 {
		t.Errorf("%d migrations with migrate=auto, want 1", n)
	}
	if _, err := dlock.Open(t.Context(), "logtest://x?migrate=yes"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("migrate=yes = %v, want ErrInvalidArgument naming the value", err)
	}
}
