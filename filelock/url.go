package filelock

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

func init() { dlock.Register(Scheme, open) }

// open builds a driver from a file URL; see the package doc's URLs.
func open(ctx context.Context, rawURL string) (driver.Driver, error) {
	c, path, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	d, err := c.openPath(ctx, path)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// parseURL accepts file:///abs/path (or file://localhost/abs/path) and the
// query keys sync and retention.
func parseURL(rawURL string) (Config, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, "", fmt.Errorf("%w: malformed file URL %q", dlock.ErrInvalidArgument, rawURL)
	}
	if u.Scheme != Scheme || u.Opaque != "" || (u.Host != "" && u.Host != "localhost") {
		return Config{}, "", fmt.Errorf("%w: file URL %q: want file:///absolute/path/to/dlock.db", dlock.ErrInvalidArgument, rawURL)
	}
	// Strictly: Go's URL.Query drops a pair with a ';' without a word.
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		err = driver.Unique(q)
	}
	if err != nil {
		return Config{}, "", fmt.Errorf("%w: file URL %q: %v", dlock.ErrInvalidArgument, rawURL, err)
	}
	c := Config{Sync: q.Get("sync")}
	if q.Has("sync") && c.Sync == "" {
		return Config{}, "", fmt.Errorf("%w: file URL %q: sync is empty (want normal or full)", dlock.ErrInvalidArgument, rawURL)
	}
	if q.Has("retention") {
		if c.Retention, err = driver.ParseDuration(q.Get("retention")); err != nil {
			return Config{}, "", fmt.Errorf("%w: file URL %q: %s: %v", dlock.ErrInvalidArgument, rawURL, driver.ShowSetting("retention", q.Get("retention")), err)
		}
		if c.Retention <= 0 {
			return Config{}, "", fmt.Errorf("%w: file URL %q: retention=%q: want a positive duration (leave the key out for the default %s)", dlock.ErrInvalidArgument, rawURL, q.Get("retention"), DefaultRetention)
		}
	}
	q.Del("sync")
	q.Del("retention")
	for _, k := range slices.Sorted(maps.Keys(q)) {
		return Config{}, "", fmt.Errorf("%w: file URL %q: unknown query key %q (want sync, retention, ttl, wait or owner)", dlock.ErrInvalidArgument, rawURL, k)
	}
	if _, err := c.resolve(); err != nil {
		return Config{}, "", fmt.Errorf("file URL %q: %w", rawURL, err)
	}
	if err := checkPath(u.Path); err != nil {
		return Config{}, "", fmt.Errorf("file URL %q: %w", rawURL, err)
	}
	return c, u.Path, nil
}

var _ driver.SettingsReporter = (*fileDriver)(nil)

// Settings implements driver.SettingsReporter: sync and retention, as
// the URL gives them (empty on a Locker over a caller's *sql.DB, whose
// settings are the caller's).
func (d *fileDriver) Settings() map[string]string {
	if d.cfg.Sync == "" {
		return nil
	}
	return map[string]string{"sync": d.cfg.Sync, "retention": d.cfg.Retention.String()}
}
