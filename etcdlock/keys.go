package etcdlock

import (
	"net/url"
	"strings"
)

// DefaultPrefix is the etcd key prefix under which locks live unless the
// URL's prefix key or Config.Prefix says otherwise.
const DefaultPrefix = "dlock/"

// keyspace lays out a lock's keys: every contender for NAME, holder and
// waiters alike, owns one key PREFIX + escape(NAME) + "/" + LEASE-SLOT,
// where LEASE (hex) is the driver's shared etcd lease the key was first
// bound to (a waiter's key keeps its name when it moves to another of the
// driver's leases, see waitlease.go); SLOT tells apart the contenders of
// one driver for one name (see pool.register). The key
// with the smallest create revision holds the lock; the others wait in
// create-revision order. The name is path-escaped
// so that it contains no "/": one name's keys are exactly the keys under
// its directory, and a name prefix is a key prefix.
type keyspace struct{ prefix string }

// dir is the key prefix shared by every contender for name.
func (k keyspace) dir(name string) string { return k.prefix + url.PathEscape(name) + "/" }

// namePrefix is the key prefix of every name starting with prefix.
func (k keyspace) namePrefix(prefix string) string { return k.prefix + url.PathEscape(prefix) }

// name recovers the lock name from a contender's key.
func (k keyspace) name(key []byte) (string, bool) {
	rest, ok := strings.CutPrefix(string(key), k.prefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", false
	}
	name, err := url.PathUnescape(rest[:i])
	return name, err == nil
}
