package filelock

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

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
	q := u.Query()
	c := Config{Sync: q.Get("sync")}
	if r := q.Get("retention"); r != "" {
		if c.Retention, err = time.ParseDuration(r); err != nil {
			return Config{}, "", fmt.Errorf("%w: file URL %q: retention=%q: want a Go duration such as 1h", dlock.ErrInvalidArgument, rawURL, r)
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
