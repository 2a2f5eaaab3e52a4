package redislock_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
)

// TestConfigInvalid: each invalid field is an error wrapping
// dlock.ErrInvalidArgument that names the field and its value, from
// Locker and Driver alike; so is a nil client.
func TestConfigInvalid(t *testing.T) {
	c := client(t, testserver.Redis(t).Addr)
	bad := []struct {
		cfg  redislock.Config
		want []string
	}{
		{redislock.Config{Prefix: strings.Repeat("p", 65)}, []string{"Config.Prefix", "pppp", "65 bytes"}},
		{redislock.Config{ReplicaSync: -1}, []string{"Config.ReplicaSync", "-1"}},
		{redislock.Config{ReplicaSync: 65}, []string{"Config.ReplicaSync", "65"}},
		{redislock.Config{ReplicaSync: 1, ReplicaTimeout: -time.Second}, []string{"Config.ReplicaTimeout", "-1s"}},
		{redislock.Config{ReplicaTimeout: time.Microsecond}, []string{"Config.ReplicaTimeout", "1µs"}},
		{redislock.Config{ReplicaTimeout: 2 * time.Minute}, []string{"Config.ReplicaTimeout", "2m0s"}},
	}
	for _, b := range bad {
		_, lerr := b.cfg.Locker(c)
		_, derr := b.cfg.Driver(c)
		for _, err := range []error{lerr, derr} {
			if !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Errorf("%+v: %v, want ErrInvalidArgument", b.cfg, err)
				continue
			}
			for _, w := range b.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%+v: %q does not name %q", b.cfg, err, w)
				}
			}
		}
	}
	if _, err := redislock.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v, want ErrInvalidArgument", err)
	}
}

// TestConfigDriver: the bare driver queues waiters (driver.Queuer) by
// default and not with NoFairQueue; closing it leaves the client open.
func TestConfigDriver(t *testing.T) {
	c := client(t, testserver.Redis(t).Addr)
	quiet := slog.New(slog.DiscardHandler)
	for _, cfg := range []redislock.Config{{Logger: quiet}, {Logger: quiet, NoFairQueue: true}} {
		d, err := cfg.Driver(c)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if _, queues := d.(driver.Queuer); queues == cfg.NoFairQueue {
			t.Errorf("%+v: driver.Queuer = %v, want %v", cfg, queues, !cfg.NoFairQueue)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctxT(t)).Err(); err != nil {
			t.Errorf("the client is closed with the driver: %v", err)
		}
	}
}
