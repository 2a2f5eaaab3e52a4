package failover_test

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/failover"
)

// grant is a grant of "n" at times in milliseconds from t0 (ended -1:
// never released), with a TTL of 5 s.
func grant(fence uint64, requested, answered, ended int) failover.Grant {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	g := failover.Grant{Name: "n", Fence: fence, Requested: at(requested), Answered: at(answered), TTL: 5 * time.Second}
	if ended >= 0 {
		g.Ended = at(ended)
	}
	return g
}

// TestLedgerRule: each way two grants of one name can break mutual
// exclusion or the fence order is counted once, and the legitimate
// sequences are not.
func TestLedgerRule(t *testing.T) {
	cases := []struct {
		name                 string
		grants               []failover.Grant
		inversions, overlaps int
	}{
		{"one after the other", []failover.Grant{grant(1, 0, 2, 3), grant(2, 1, 4, 5)}, 0, 0},
		{"B answered after A's release was sent", []failover.Grant{grant(1, 0, 2, 10), grant(2, 5, 11, 12)}, 0, 0},
		{"B granted while A held", []failover.Grant{grant(1, 0, 2, 10), grant(2, 5, 6, 12)}, 0, 1},
		{"A never released, B granted within its TTL", []failover.Grant{grant(1, 0, 2, -1), grant(2, 100, 101, 102)}, 0, 1},
		{"A lapsed unknowingly, B after its TTL with a higher fence", []failover.Grant{grant(1, 0, 2, -1), grant(2, 5000, 5001, 5002)}, 0, 0},
		{"B's fence equal to A's", []failover.Grant{grant(7, 0, 2, 3), grant(7, 4, 5, 6)}, 1, 0},
		{"B's fence below A's", []failover.Grant{grant(7, 0, 2, 3), grant(6, 4, 5, 6)}, 1, 0},
		{"B asked before A was answered: fences may be in either order", []failover.Grant{grant(7, 0, 2, 3), grant(6, 1, 5, 6)}, 0, 0},
		{"after a lapse, a fence below the lapsed one", []failover.Grant{grant(9, 0, 2, -1), grant(3, 6000, 6001, 6002)}, 1, 0},
		{"lower fence while A held: both", []failover.Grant{grant(9, 0, 2, 10), grant(3, 5, 6, 12)}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := failover.NewLedger()
			for _, g := range c.grants {
				l.Add(g)
			}
			inv, ovl, n := l.DoubleGrants()
			if inv != c.inversions || ovl != c.overlaps || n != len(c.grants) {
				t.Errorf("DoubleGrants() = %d inversions, %d overlaps, %d grants; want %d, %d, %d",
					inv, ovl, n, c.inversions, c.overlaps, len(c.grants))
			}
		})
	}
}

// TestLedgerNamesApart: grants of different names never count together.
func TestLedgerNamesApart(t *testing.T) {
	l := failover.NewLedger()
	a, b := grant(1, 0, 2, 10), grant(1, 0, 3, 10)
	b.Name = "other"
	l.Add(a)
	l.Add(b)
	if inv, ovl, _ := l.DoubleGrants(); inv+ovl != 0 {
		t.Errorf("two names held at once with the same fence: %d inversions, %d overlaps; want none", inv, ovl)
	}
}
