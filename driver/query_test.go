package driver_test

import (
	"net/url"
	"testing"

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
