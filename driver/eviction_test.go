package driver

import "testing"

// TestParseEviction reads the "FENCE NAME" wire form (moved here from
// redislock with its cases, when the three drivers' copies became one),
// and checks that Eviction.String writes what it reads.
func TestParseEviction(t *testing.T) {
	for in, want := range map[string]Eviction{
		"12 a b":  {Name: "a b", Fence: 12},
		"7 ":      {Name: "", Fence: 7},
		"1 x\ny":  {Name: "x\ny", Fence: 1},
		"":        {},
		"x name":  {},
		"12":      {},
		"-1 name": {},
	} {
		got, ok := ParseEviction(in)
		if ok != (want != Eviction{}) || got != want {
			t.Errorf("ParseEviction(%q) = %+v, %v; want %+v", in, got, ok, want)
		}
		if ok && got.String() != in {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), in)
		}
	}
}
