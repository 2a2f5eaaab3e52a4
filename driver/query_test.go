package driver_test

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

func TestStripQuery(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://h/db?ttl=5s&options=-c%20synchronous_commit%3Doff&mode=advisory", "postgres://h/db?options=-c%20synchronous_commit%3Doff"},
		{"redis://h?a=1+2&wait=1s", "redis://h?a=1+2"},
		{"redis://h?ttl=1s", "redis://h"},
		{"redis://h", "redis://h"},
		{"redis://h?%74tl=1s&x=1", "redis://h?x=1"},
	} {
		u, err := url.Parse(c.in)
		if err != nil {
			t.Fatal(err)
		}
		driver.StripQuery(u, "ttl", "wait", "mode")
		if got := u.String(); got != c.want {
			t.Errorf("StripQuery(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestParseQuery(t *testing.T) {
	for _, c := range []struct{ raw, err string }{
		{"mode=advisory;", `query "mode=advisory;" has a ';'`},
		{"a=1&fair=false;x", `query "fair=false;x" has a ';'`},
		{"a=%zz", `query "a=%zz": bad %-escape in the value`},
		{"%zz=1", "bad %-escape in the key"},
		{"=1", `query "=1" has no key`},
		{"password=s3cret;x", `query "password=xxxxx" has a ';'`},
		{"x=" + strings.Repeat("v", 100) + ";", "…"},
	} {
		_, err := driver.ParseQuery(c.raw)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseQuery(%q) = %v, want an error containing %s", c.raw, err, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseQuery(%q) echoes a password: %v", c.raw, err)
		}
	}
	q, err := driver.ParseQuery("a=1&&b=x+y&addr=h1&addr=h2&c&d=%3B")
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"a": {"1"}, "b": {"x y"}, "addr": {"h1", "h2"}, "c": {""}, "d": {";"}}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("ParseQuery = %v, want %v", q, want)
	}
	if err := driver.Unique(q, "addr"); err != nil {
		t.Errorf("Unique with addr repeatable: %v", err)
	}
	if err := driver.Unique(q); err == nil || !strings.Contains(err.Error(), `"addr" is given 2 times (addr="h1", addr="h2")`) {
		t.Errorf("Unique = %v, want addr given twice", err)
	}
	q, _ = driver.ParseQuery("password=a&password=b")
	if err := driver.Unique(q); err == nil || strings.Contains(err.Error(), `"a"`) {
		t.Errorf("Unique on a repeated password = %v, want an error without the values", err)
	}
}

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"30s", 30 * time.Second, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"0", 0, ""},
		{"-5ms", -5 * time.Millisecond, ""},
		{"3000000h", 0, "longer than the longest duration"},
		{"9223372036855ms", 0, "longer than the longest duration"},
		{"18446744073740s", 0, "longer than the longest duration"},
		{"soon", 0, "not a duration"},
		{"5", 0, "missing unit: write 5s, 5ms or 5m"},
		{"12345678901234567890", 0, "not a duration"},
		{"", 0, "not a duration"},
	} {
		d, err := driver.ParseDuration(c.in)
		switch {
		case c.err == "" && (err != nil || d != c.want):
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", c.in, d, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseDuration(%q) = %s, %v; want an error containing %s", c.in, d, err, c.err)
		}
	}
}

// FuzzParseQuery: whatever ParseQuery accepts, it reads whole — every
// non-empty pair becomes exactly one value, as url.ParseQuery reads it —
// and whatever it refuses, Go's URL.Query would have read differently or
// not at all.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "mode=advisory;", "a=%zz", "a&&b", "x=1&x=2", "=", "a=b=c", "+%20=%2B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := driver.ParseQuery(raw)
		std, stdErr := url.ParseQuery(raw)
		if err != nil {
			if stdErr == nil && !strings.Contains(err.Error(), "has no key") {
				t.Fatalf("ParseQuery(%q) refused what url.ParseQuery reads whole: %v", raw, err)
			}
			return
		}
		if stdErr != nil {
			t.Fatalf("ParseQuery(%q) accepted what url.ParseQuery refuses: %v", raw, stdErr)
		}
		n := 0
		for _, p := range strings.Split(raw, "&") {
			if p != "" {
				n++
			}
		}
		got := 0
		for _, vs := range q {
			got += len(vs)
		}
		if got != n || !reflect.DeepEqual(q, std) {
			t.Fatalf("ParseQuery(%q) = %v (%d values of %d pairs), url.ParseQuery = %v", raw, q, got, n, std)
		}
	})
}
