package dlock

import (
	"errors"
	"strings"
	"testing"
)

// TestUnknownScheme: a program that does not link every bundled backend
// in (a library user's) is told the import that registers the scheme it
// names or nearly names; one that links them all is not.
func TestUnknownScheme(t *testing.T) {
	all := union(nil)
	for _, c := range []struct {
		scheme     string
		registered []string
		want, not  string
	}{
		{"reddis", []string{"mem"}, `did you mean redis? Its driver is not linked into this program: add import _ "github.com/dlockdev/dlock/redislock"`, ""},
		{"redis", []string{"mem"}, `URL scheme "redis" is not registered in this program; forgotten import? add import _ "github.com/dlockdev/dlock/redislock"`, ""},
		{"nosuch", []string{"mem"}, `(schemes: mem); etcd, file, postgres, postgresql, redis, rediss, redlock, zk are bundled too: import _ "github.com/dlockdev/dlock/backends"`, ""},
		{"nosuch", nil, `no backend is registered in this program: add import _ "github.com/dlockdev/dlock/backends"`, ""},
		{"reddis", all, "did you mean redis? (schemes: etcd, file, mem, postgres, postgresql, redis, rediss, redlock, zk)", "import"},
		{"http", all, `unknown URL scheme "http" (schemes: etcd, file, mem, postgres, postgresql, redis, rediss, redlock, zk)`, "import"},
	} {
		err := unknownSchemeOf(c.scheme, c.registered)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) || (c.not != "" && strings.Contains(err.Error(), c.not)) {
			t.Errorf("%s with %v registered: %v\nwant it to say %q and not %q", c.scheme, c.registered, err, c.want, c.not)
		}
	}
}
