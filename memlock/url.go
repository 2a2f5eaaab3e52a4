package memlock

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

func init() { dlock.Register(Scheme, open) }

// open returns a driver on the process-wide Store named by mem://NAME.
func open(_ context.Context, rawURL string) (driver.Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalidURL("malformed URL: %v", err)
	}
	q, err := driver.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalidURL("%v", err)
	}
	if len(q) > 0 {
		keys := slices.Sorted(maps.Keys(q))
		return nil, invalidURL("unknown query key(s) %s (memlock accepts ttl, wait, owner)", strings.Join(keys, ", "))
	}
	if u.Path != "" && u.Path != "/" {
		return nil, invalidURL("path %q: want mem://NAME", u.Path)
	}
	return Config{}.Driver(Shared(u.Host))
}

func invalidURL(format string, args ...any) error {
	return fmt.Errorf("%w: memlock: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}
