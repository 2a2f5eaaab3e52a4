package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/memlock"
)

// TestOpenQueryDefaults: ttl, wait and owner in the URL become the
// Locker's defaults; options given to Open override them.
func TestOpenQueryDefaults(t *testing.T) {
	ctx := context.Background()
	l, err := dlock.Open(ctx, "mem://open-defaults?ttl=2s&wait=0s&owner=from-url")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := l.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	if ls.TTL() != 2*time.Second || ls.Owner() != "from-url" {
		t.Errorf("lease TTL %s owner %q, want the URL's 2s and from-url", ls.TTL(), ls.Owner())
	}
	start := time.Now()
	if _, err := l.Acquire(ctx, "job"); !errors.Is(err, dlock.ErrNotAcquired) || time.Since(start) > time.Second {
		t.Errorf("Acquire with the URL's wait=0s: %v after %s, want ErrNotAcquired at once", err, time.Since(start))
	}
	l2, err := dlock.Open(ctx, "mem://open-defaults?owner=from-url", dlock.WithOwner("from-option"))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	_, err = l2.TryAcquire(ctx, "job")
	var he *dlock.HeldError
	if !errors.As(err, &he) || he.Owner != "from-url" {
		t.Errorf("same-named mem:// stores are not shared: %v", err)
	}
	ls2, err := l2.TryAcquire(ctx, "job2")
	if err != nil {
		t.Fatal(err)
	}
	defer ls2.Release(ctx)
	if ls2.Owner() != "from-option" {
		t.Errorf("owner %q, want the option's, which overrides the URL's", ls2.Owner())
	}
}

// TestOpenErrors: bad URLs are invalid arguments that say how to fix them
// and never print a password.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct{ url, mention string }{
		{"nosuch://host/x", `unknown URL scheme "nosuch"`},
		{"nosuch://host/x", "mem"},
		{"localhost:6379", "scheme"},
		// A URL without its scheme, or without the "//" after it.
		{"127.0.0.1:26481", `no scheme in URL "127.0.0.1:26481"; e.g. redis://127.0.0.1:26481`},
		{"localhost:6379", `e.g. redis://localhost:6379`},
		{"u:s3cret@127.0.0.1:5432/db", "e.g. postgres://u:xxxxx@127.0.0.1:5432/db"},
		{"/var/lib/dlock.db", "file:///var/lib/dlock.db"},
		{"redis:/127.0.0.1:26481", "URL has no host"},
		{"redis:/127.0.0.1:26481", "did you mean redis://127.0.0.1:26481?"},
		{"redis:127.0.0.1:26481/2", "did you mean redis://127.0.0.1:26481/2?"},
		{"redis:/:s3cret@127.0.0.1:26481", "did you mean redis://:xxxxx@127.0.0.1:26481?"},
		{"redis:/u:s3cret@localhost/0?ttl=5s", "did you mean redis://u:xxxxx@localhost/0?ttl=5s?"},
		// A mistyped scheme gets the nearest one (see TestUnknownScheme
		// for a program that does not link every backend in).
		{"reddis://h/x", "unknown URL scheme \"reddis\"; did you mean redis? (schemes: "},
		{"postgress://h/x", "did you mean postgres?"},
		{"http://h/x", `unknown URL scheme "http" (schemes: `},
		{"mem://x?ttl=forever", `ttl="forever": not a duration`},
		{"mem://x?ttl=9999999999h", "longer than the longest duration"},
		{"mem://x?wait=3000000h", "longer than the longest duration"},
		// Go's URL.Query drops a pair that holds a ';': the setting would
		// silently not be in force.
		{"mem://x?ttl=1s;x", `"ttl=1s;x" has a ';'`},
		{"mem://x?ttl=1s&ttl=5s", `"ttl" is given 2 times`},
		{"mem://x?owner=a&owner=b", `"owner" is given 2 times`},
		{"mem://x?a=%zz", "bad %-escape"},
		{"mem://x?;", "';'"},
		{"mem://x?migrate=sometimes", `migrate="sometimes"`},
		{"postgres://u:s3cret@h/db?password=s3cret;x", "';'"},
		{"postgres://h/db?password=s3cret&password=s3cret", "given 2 times"},
		{"mem://x?ttl=1ms", "1ms"},
		{"mem://x?wait=-1s", "negative"},
		{"mem://x?bogus=1", "bogus"},
		{"redis://user:s3cret@[::1:6379/", "malformed URL"},
	}
	for _, c := range cases {
		l, err := dlock.Open(ctx, c.url)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", c.url)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument mentioning %q", c.url, err, c.mention)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) leaked the password: %v", c.url, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for _, raw := range []string{
		"redis://user:s3cret@localhost:6379/0",
		"postgres://localhost/db?password=s3cret",
		"redis://:s3cret@[::1", // unparseable
		"postgres://localhost/db?password=s3cret;x",
		"postgres://localhost/db?sslpassword=s3cret&x=%zz",
		"postgres://localhost/db?pass%77ord=s3cret",
	} {
		if got := dlock.Redact(raw); strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, leaks the password", raw, got)
		}
	}
	if got := dlock.Redact("redis://localhost:6379/0"); got != "redis://localhost:6379/0" {
		t.Errorf("Redact changed a URL without secrets: %q", got)
	}
}

func TestSchemesListsMem(t *testing.T) {
	found := false
	for _, s := range dlock.Schemes() {
		found = found || s == "mem"
	}
	if !found {
		t.Errorf("Schemes() = %v, want mem registered", dlock.Schemes())
	}
}
