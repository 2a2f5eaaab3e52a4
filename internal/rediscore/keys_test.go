package rediscore

import (
	"path"
	"strings"
	"testing"
)

func TestKeysRoundTrip(t *testing.T) {
	k := Keys{Prefix: "p:"}
	for _, name := range []string{"a", "a}b", "}x", "%7D", "a{b", "100%", "ünï/cøde", "*?[x]\\"} {
		lock := k.Lock(name)
		if strings.Count(lock, "}") != 1 || !strings.HasSuffix(lock, "}") {
			t.Errorf("Lock(%q) = %q: the hash tag must span the whole name", name, lock)
		}
		if got, ok := k.Name(lock); !ok || got != name {
			t.Errorf("Name(Lock(%q)) = %q, %v", name, got, ok)
		}
		for _, other := range []string{k.LegacyFence(name), k.Queue(name), k.Deadlines(name), k.Asks(name), k.Channel(name)} {
			if !strings.HasPrefix(other, lock+":") {
				t.Errorf("%q does not share %q's hash tag", other, lock)
			}
			if _, ok := k.Name(other); ok {
				t.Errorf("Name(%q) took a non-lock key for a lock", other)
			}
		}
	}
}

func TestPattern(t *testing.T) {
	k := Keys{Prefix: "p:"}
	cases := []struct {
		prefix, name string
		match        bool
	}{
		{"", "anything", true},
		{"jobs/", "jobs/1", true},
		{"jobs/", "other", false},
		{"*", "x", false},
		{"*", "*x", true},
		{"a}", "a}b", true},
		{"[ab]", "a", false},
	}
	for _, c := range cases {
		ok, err := path.Match(k.Pattern(c.prefix), k.Lock(c.name))
		if err != nil || ok != c.match {
			t.Errorf("Pattern(%q) vs Lock(%q): match %v (%v), want %v", c.prefix, c.name, ok, err, c.match)
		}
		if ok, _ := path.Match(k.Pattern(c.prefix), k.LegacyFence(c.name)); ok {
			t.Errorf("Pattern(%q) matches the fence key of %q", c.prefix, c.name)
		}
	}
}

func TestParseValue(t *testing.T) {
	v := Value{Token: "tok", Fence: 1796230631535799, Owner: "host/1\nwith newline?"}
	got, err := ParseValue(v.String())
	if err != nil || got != v {
		t.Errorf("ParseValue(%q) = %+v, %v", v.String(), got, err)
	}
	for _, bad := range []string{"", "tok", "tok\nNaN\nowner", "tok\n1.8e+15\nx"} {
		if _, err := ParseValue(bad); err == nil {
			t.Errorf("ParseValue(%q) accepted a malformed value", bad)
		}
	}
}

func TestSlotTags(t *testing.T) {
	k := Keys{Prefix: "p:"}
	for s := range slots {
		if got := Slot("x:{" + slotTag(s) + "}"); got != s {
			t.Fatalf("slotTag(%d) = %q hashes to slot %d", s, slotTag(s), got)
		}
	}
	for _, name := range []string{"a", "b", "jobs/1", "ünï"} {
		if Slot(k.Counter(name, true)) != Slot(k.Lock(name)) {
			t.Errorf("Counter(%q, cluster) = %q is not in the lock's slot", name, k.Counter(name, true))
		}
	}
	if k.Counter("a", false) != k.Counter("b", false) {
		t.Error("outside Cluster every name must share one counter")
	}
	// Known slots from the Redis Cluster spec: "123456789" -> 0x31C3.
	if Slot("123456789") != 0x31C3 {
		t.Errorf("Slot(123456789) = %d, want %d", Slot("123456789"), 0x31C3)
	}
}

func TestSet(t *testing.T) {
	k := Keys{Prefix: "p:"}
	for _, cluster := range []bool{false, true} {
		got := k.Set("a}b", cluster)
		want := []string{k.Lock("a}b"), k.Counter("a}b", cluster), k.Queue("a}b"), k.Deadlines("a}b"), k.LegacyFence("a}b"), k.Asks("a}b"), k.Watched("a}b")}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Set(cluster=%v) = %q, want %q", cluster, got, want)
		}
	}
}
