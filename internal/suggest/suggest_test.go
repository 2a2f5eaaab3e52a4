package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"redis", "redis", 0}, {"reddis", "redis", 1}, {"redsi", "redis", 1},
		{"ttll", "ttl", 1}, {"advsory", "advisory", 1}, {"http", "etcd", 3}, {"", "zk", 2},
		{"postgress", "postgres", 1}, {"lease", "advisory", 7},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	schemes := []string{"etcd", "file", "mem", "postgres", "postgresql", "redis", "rediss", "redlock", "zk"}
	for _, c := range []struct {
		word, want string
	}{
		{"reddis", "redis"}, {"postgress", "postgres"}, {"etc", "etcd"}, {"zkk", "zk"},
		{"http", ""}, {"https", ""}, {"mysql", ""}, {"redis", ""}, {"z", "zk"}, {"", ""},
	} {
		got, ok := Closest(c.word, schemes)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Closest(%q) = %q, %v, want %q", c.word, got, ok, c.want)
		}
	}
}
