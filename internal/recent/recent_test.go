package recent

import (
	"fmt"
	"testing"
	"time"
)

// TestNames: a name never seen is not contended, one just seen is; a
// name is forgotten once the set's time has passed since it was seen;
// reaching the bound forgets every name.
func TestNames(t *testing.T) {
	n := New(time.Hour, 3)
	if n.Lately("a") {
		t.Fatal("a name never seen is taken as contended")
	}
	n.Saw("a")
	if !n.Lately("a") {
		t.Fatal("a name just seen is not taken as contended")
	}
	short := New(time.Millisecond, 3)
	short.Saw("a")
	time.Sleep(5 * time.Millisecond)
	if short.Lately("a") {
		t.Fatal("a name seen longer ago than the set's time is still taken as contended")
	}
	for i := range 2 {
		n.Saw(fmt.Sprint(i))
	}
	n.Saw("x") // the fourth name: the bound was reached, all are forgotten
	if n.Lately("a") || n.Lately("0") || !n.Lately("x") {
		t.Fatalf("after the bound: a %v, 0 %v, x %v; want false, false, true", n.Lately("a"), n.Lately("0"), n.Lately("x"))
	}
}
