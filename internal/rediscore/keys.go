package rediscore

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// DefaultPrefix starts every key and channel of the single-node driver by
// default. Redlock's prefix extends it ("dlock:redlock:"), so that neither
// driver takes the other's keys for its locks (Keys.Name).
const DefaultPrefix = "dlock:"

// Keys is the key layout for one prefix, the same in both drivers (Redlock
// keeps it on each node; the waiters' queue is the single-node driver's
// alone). A lock named N lives at prefix{N}, its queue of waiters at
// prefix{N}:queue and prefix{N}:waiters, and its release channel is
// prefix{N}:released. The braces are a Redis
// Cluster hash tag: all of them share N's slot, so one script can touch
// them. A '}' (or '%') in N is written %7D (%25) so that the tag always
// spans the whole name. Its run ledger (driver.Ledger) is prefix{N}:runs
// and prefix{N}:runs:slots (see Runs).
//
// Fences come from one counter per server (prefix + "fence"), or in a
// Cluster one per hash slot (prefix + "fence:{TAG}", TAG chosen to hash to
// N's slot): a bounded number of keys however many names are used. Older
// versions kept one counter per name at prefix{N}:fence (LegacyFence); the
// scripts fold such a key into the counter and delete it.
type Keys struct{ Prefix string }

var (
	escaper   = strings.NewReplacer("%", "%25", "}", "%7D")
	unescaper = strings.NewReplacer("%25", "%", "%7D", "}")
)

// Lock returns the lock key of name.
func (k Keys) Lock(name string) string { return k.Prefix + "{" + escaper.Replace(name) + "}" }

// Set returns every key of name that the acquire script uses, in its
// KEYS order: lock, fence counter, queue, waiter deadlines, legacy fence,
// waiters' requests, watched mark.
// It escapes the name once.
func (k Keys) Set(name string, cluster bool) []string {
	lock := k.Lock(name)
	counter := k.Prefix + "fence"
	if cluster {
		counter = k.Prefix + "fence:{" + slotTag(Slot(lock)) + "}"
	}
	// The five keys derived from lock are slices of one string: one
	// allocation instead of five, on every acquire and release.
	all := lock + ":queue" + lock + ":waiters" + lock + ":fence" + lock + ":asks" + lock + ":watched"
	n := len(lock)
	queue, all := all[:n+6], all[n+6:]
	waiters, all := all[:n+8], all[n+8:]
	legacy, all := all[:n+6], all[n+6:]
	asks, watched := all[:n+5], all[n+5:]
	return []string{lock, counter, queue, waiters, legacy, asks, watched}
}

// Watched returns the key of name's watched mark: while it exists, a
// release publishes on the release channel even when nobody queues. Watch
// sets it, and so does a single attempt that finds the lock held; it
// expires on its own (after WatchedTTL).
func (k Keys) Watched(name string) string { return k.Lock(name) + ":watched" }

// WatchedTTL is how long a watched mark lasts after it was last set. The
// acquire script sets it for as long (30000 ms).
const WatchedTTL = 30 * time.Second

// LegacyFence returns the per-name fence counter key that versions before
// the bounded layout kept forever.
func (k Keys) LegacyFence(name string) string { return k.Lock(name) + ":fence" }

// Counter returns the fence counter key for name: the server's one
// counter, or with cluster set the counter of name's hash slot.
func (k Keys) Counter(name string, cluster bool) string {
	if !cluster {
		return k.Prefix + "fence"
	}
	return k.Prefix + "fence:{" + slotTag(Slot(k.Lock(name))) + "}"
}

// Queue returns the key of name's FIFO queue of waiters (a sorted set of
// tokens by arrival).
func (k Keys) Queue(name string) string { return k.Lock(name) + ":queue" }

// Deadlines returns the key of the deadlines by which name's queued
// waiters must renew their place (a sorted set of tokens by deadline).
func (k Keys) Deadlines(name string) string { return k.Lock(name) + ":waiters" }

// Asks returns the key of the requests (TTL, owner) of name's queued
// waiters, which a release uses to hand the lock to the queue's head.
func (k Keys) Asks(name string) string { return k.Lock(name) + ":asks" }

// Runs returns the key of name's run ledger: a hash of its runs by slot
// field (RunField) -> record (EncodeRun), and under the field "fence"
// (RunsFence) the highest fence a ledger write has carried. It has no
// expiry: ClaimRun keeps it to the newest slots it is told to keep.
func (k Keys) Runs(name string) string { return k.Lock(name) + ":runs" }

// RunSlots returns the key of the index of name's run ledger: a sorted
// set of its slot fields, all of score 0, hence in slot order (the fields
// have a fixed width), by which ClaimRun drops the oldest slots.
func (k Keys) RunSlots(name string) string { return k.Lock(name) + ":runs:slots" }

// Ledger returns the KEYS of the run ledger's scripts for name: Runs,
// RunSlots.
func (k Keys) Ledger(name string) []string { return []string{k.Runs(name), k.RunSlots(name)} }

// Channel returns the release channel of name.
func (k Keys) Channel(name string) string { return k.Lock(name) + ":released" }

// WaiterChannel returns the channel on which a queued waiter (token) is
// told that the lock is free for it.
func (k Keys) WaiterChannel(name, token string) string { return k.Channel(name) + ":" + token }

// Inbox returns the channel of a Locker's inbox: id is the Locker's own
// random identifier. A release tells a queued waiter there, with its
// token, that the lock is handed to it or that it is its turn to try.
func (k Keys) Inbox(id string) string { return k.Prefix + "inbox:" + id }

// Pattern returns a SCAN MATCH pattern for the lock keys of names starting
// with prefix (the other keys do not match: they end in ":fence" etc.).
func (k Keys) Pattern(prefix string) string {
	return globEscape(k.Prefix+"{"+escaper.Replace(prefix)) + "*}"
}

// Name returns the lock name of a lock key, or false if key is not one.
func (k Keys) Name(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.Prefix+"{")
	if !ok || !strings.HasSuffix(rest, "}") || strings.Contains(rest[:len(rest)-1], "}") {
		return "", false
	}
	return unescaper.Replace(rest[:len(rest)-1]), true
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Mark returns the start of every lock value that token holds: the token
// and the '\n' that ends it. The scripts' token check (held) compares a
// value's start with a mark; a mark of "token/" (no '\n') covers every
// attempt of a Redlock token, whose values start "token/attempt\n".
func Mark(token string) string { return token + "\n" }

// Value is what a lock key holds: "token\nfence\nowner".
type Value struct {
	Token string
	Fence uint64
	Owner string
}

// errBadValue reports a lock key whose value is not in the drivers' format.
var errBadValue = errors.New("rediscore: lock value is not token\\nfence\\nowner")

// ParseValue splits a lock key's value.
func ParseValue(v string) (Value, error) {
	tok, rest, ok1 := strings.Cut(v, "\n")
	fence, owner, ok2 := strings.Cut(rest, "\n")
	f, err := strconv.ParseUint(fence, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return Value{}, errBadValue
	}
	return Value{Token: tok, Fence: f, Owner: owner}, nil
}

// String formats v as a lock key's value.
func (v Value) String() string {
	return v.Token + "\n" + strconv.FormatUint(v.Fence, 10) + "\n" + v.Owner
}
