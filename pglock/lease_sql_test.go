package pglock

import (
	"strings"
	"testing"
)

// TestCoalescedStatementsDecideAsAlone: the statements of coalesced calls
// decide each item with the condition and the changes of the statement
// for one call, written for the item's own values.
func TestCoalescedStatementsDecideAsAlone(t *testing.T) {
	if want := strings.ReplaceAll(grantable, "$2", "excluded.token"); grantableExcluded != want {
		t.Errorf("leaseAcquireMany grants when\n%s\nleaseAcquire when\n%s", grantableExcluded, want)
	}
	set := func(stmt, end string) string {
		i, j := strings.Index(stmt, " SET "), strings.Index(stmt, end)
		if i < 0 || j < i {
			t.Fatalf("no SET ... %q in %s", end, stmt)
		}
		return stmt[i:j]
	}
	// A waiter's attempts: every parameter of the single statement's
	// condition and changes is the item's own.
	for _, frag := range []string{inTurnSet, inTurnWhere} {
		item := inTurnItem.Replace(frag)
		if i := strings.IndexAny(item, "$"); i >= 0 || strings.Contains(item, "excluded.") {
			t.Errorf("leaseAcquireInTurnMany decides an item with a value of the whole statement:\n%s", item)
		}
	}
	one := strings.ReplaceAll(set(leaseRelease, "\nWHERE"), "$2::text", "q.token")
	if many := set(leaseReleaseMany, "\nFROM"); many != one {
		t.Errorf("leaseReleaseMany sets\n%s\nleaseRelease\n%s", many, one)
	}
}
