package rediscore

import (
	"path"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestRunRoundTrip: a record encodes and decodes to itself (times in UTC,
// to the nanosecond; a fence above 2^53 exact), and its field is its
// slot's.
func TestRunRoundTrip(t *testing.T) {
	at := time.Date(2026, 5, 1, 2, 3, 4, 567891234, time.FixedZone("X", 3600))
	recs := []driver.RunRecord{
		{Name: "a}b", Slot: at, Schedule: "0 2 * * *", Owner: "host/1", Fence: 1<<64 - 1, Attempt: 3,
			Started: at.Add(time.Second), Ended: at.Add(time.Minute), Status: "exit status 3 \"quoted\" ünï"},
		{Name: "n", Slot: at, Owner: "h", Fence: 1<<53 + 1, Attempt: 1},
	}
	for _, rec := range recs {
		field, value, err := EncodeRun(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRun(rec.Name, value)
		if err != nil {
			t.Fatal(err)
		}
		same := got.Slot.Equal(rec.Slot) && got.Started.Equal(rec.Started) && got.Ended.Equal(rec.Ended) &&
			got.Ended.IsZero() == rec.Ended.IsZero() && got.Started.IsZero() == rec.Started.IsZero() &&
			got.Slot.Location() == time.UTC && got.Fence == rec.Fence && got.Owner == rec.Owner &&
			got.Status == rec.Status && got.Attempt == rec.Attempt && got.Schedule == rec.Schedule && got.Name == rec.Name
		if !same {
			t.Errorf("DecodeRun(EncodeRun(%+v)) = %+v", rec, got)
		}
		if want, _ := RunField(rec.Slot); field != want || len(field) != 19 {
			t.Errorf("field %q, want %q (19 digits)", field, want)
		}
	}
	if _, err := DecodeRun("n", `{"owner":"x"}`); err == nil {
		t.Error("DecodeRun of a record without a slot: no error")
	}
}

// TestRunFieldOrder: the fields of slots sort as the slots do, as the
// index (a sorted set of equal scores, in byte order) needs.
func TestRunFieldOrder(t *testing.T) {
	slots := []time.Time{
		time.Unix(0, 1).UTC(), time.Unix(1, 0), time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	prev := ""
	for _, s := range slots {
		f, err := RunField(s)
		if err != nil {
			t.Fatal(err)
		}
		if f <= prev {
			t.Errorf("RunField(%s) = %q, not after %q", s, f, prev)
		}
		prev = f
	}
}

// TestLedgerKeys: the ledger's keys share the lock's hash tag, are not
// taken for lock keys, and escape the match of the by-hand clean-up of
// legacy fence counters (prefix{*}:fence).
func TestLedgerKeys(t *testing.T) {
	k := Keys{Prefix: "p:"}
	for _, name := range []string{"a", "a}b", "x:runs", "y:fence"} {
		for _, key := range k.Ledger(name) {
			if !strings.HasPrefix(key, k.Lock(name)+":") || Slot(key) != Slot(k.Lock(name)) {
				t.Errorf("%q does not share %q's hash slot", key, k.Lock(name))
			}
			if _, ok := k.Name(key); ok {
				t.Errorf("Name(%q) took a ledger key for a lock", key)
			}
			if ok, _ := path.Match("p:{*}:fence", key); ok {
				t.Errorf("%q matches the legacy fence clean-up pattern", key)
			}
		}
	}
}
