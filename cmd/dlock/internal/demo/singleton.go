package demo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// runSingleton: two schedulers fire the same nightly job at the same
// instant; exactly one runs it. On Postgres it uses advisory locks.
func runSingleton(ctx context.Context, e *env) (string, bool, error) {
	if _, err := e.resource(""); err != nil {
		return "", false, err
	}
	restore := e.url
	defer func() { e.url = restore }()
	e.url = advisoryURL(e.url)
	if e.url != restore {
		e.say("--", "Postgres: using advisory locks (mode=advisory)")
		if err := migrateURL(ctx, e.url); err != nil {
			return "", false, err
		}
	}
	at := strconv.FormatInt(time.Now().Add(500*time.Millisecond).UnixMilli(), 10)
	ps, err := e.spawnAll(ctx, []string{"A", "B"}, "scheduler", "--name", e.lockName("nightly-report"),
		"--since", at, "--hold", max(e.ttl, time.Second).String())
	if err != nil {
		return "", false, err
	}
	if err := e.waitAll(ctx, ps, time.Minute); err != nil {
		return "", false, err
	}
	ivs, err1 := intervals(ctx, e.res)
	skipped, err2 := countEvents(ctx, e.res, "skipped")
	if err := errors.Join(err1, err2); err != nil {
		return "", false, err
	}
	if len(ivs) != 1 {
		return fmt.Sprintf("the job ran %d times", len(ivs)), false, nil
	}
	return fmt.Sprintf("exactly one scheduler (%s) ran the job; %d skipped it", ivs[0].proc, skipped), skipped == 1, nil
}

// advisoryURL adds mode=advisory to a Postgres URL that names no mode.
func advisoryURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return raw
	}
	q := u.Query()
	if q.Has("mode") {
		return raw
	}
	q.Set("mode", "advisory")
	u.RawQuery = q.Encode()
	return u.String()
}

// migrateURL creates the schema of the backend at url.
func migrateURL(ctx context.Context, url string) error {
	l, err := openLocker(ctx, url)
	if err != nil {
		return err
	}
	defer l.Close()
	return migrate(ctx, l)
}
