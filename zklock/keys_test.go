package zklock

import (
	"strings"
	"testing"
)

// TestEscapeName: every lock name becomes one znode path component that
// ZooKeeper accepts, and is read back unchanged.
func TestEscapeName(t *testing.T) {
	for _, name := range []string{"a", "a/b", "/", ".", "..", "x y", "100%", "é", "lock-0000000001", "_c_x", "zookeeper"} {
		e := escapeName(name)
		if e == "" || e == "." || e == ".." || strings.ContainsAny(e, "/ ") {
			t.Errorf("escapeName(%q) = %q: not a usable znode name", name, e)
		}
		if back, ok := unescapeName(e); !ok || back != name {
			t.Errorf("unescapeName(escapeName(%q)) = %q, %v", name, back, ok)
		}
	}
}

// TestQueue: contenders sort by sequence number, whoever created them;
// children that are not contenders are ignored.
func TestQueue(t *testing.T) {
	q := queue([]string{
		"_c_bbbb-1234abcd-lock-0000000012",
		"lock-0000000003", // zk.NewLock's protected-less name
		"_c_aaaa-00000000-lock-0000000007",
		"not-a-contender",
		"lock-12",
	})
	var got []int64
	for _, c := range q {
		got = append(got, c.seq)
	}
	if len(got) != 3 || got[0] != 3 || got[1] != 7 || got[2] != 12 {
		t.Fatalf("queue order %v, want [3 7 12]", got)
	}
	if !owned("_c_aaaa-00000000-lock-0000000007", "aaaa") || owned("_c_aaaa-00000000-lock-0000000007", "aaa") {
		t.Error("owned does not match whole tokens")
	}
}

// TestCleanRoot: roots must be absolute, clean, and not ZooKeeper's own.
func TestCleanRoot(t *testing.T) {
	for root, ok := range map[string]bool{"": true, "/a": true, "/a/b/": true, "/": false, "a": false, "/a//b": false, "/zookeeper": false, "/zookeeper/x": false, "/a/../b": false} {
		_, err := cleanRoot(root)
		if (err == nil) != ok {
			t.Errorf("cleanRoot(%q) = %v, want ok=%v", root, err, ok)
		}
	}
}
