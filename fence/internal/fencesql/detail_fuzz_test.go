package fencesql

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParseDetail parses trigger details: arbitrary text must not panic,
// and a well-formed detail must read back the numbers and table it names.
func FuzzParseDetail(f *testing.F) {
	f.Add("offered=3 current=7 table=accounts", uint64(3), uint64(7), "accounts")
	f.Add("current=x offered=-1", uint64(0), uint64(18446744073709551615), "t")
	f.Add("", uint64(1), uint64(2), "a=b")
	f.Fuzz(func(t *testing.T, junk string, offered, current uint64, table string) {
		_ = ParseDetail(junk)
		if table == "" || strings.ContainsAny(table, " \t\n\v\f\r\u0085\u00a0") || strings.ContainsRune(table, '\u2028') {
			return
		}
		se := ParseDetail(fmt.Sprintf("offered=%d current=%d table=%s", offered, current, table))
		if se.Offered != offered || se.Current != current || se.Key != table {
			t.Fatalf("ParseDetail round trip: got %+v, want offered=%d current=%d table=%q", se, offered, current, table)
		}
	})
}
