package driver

import (
	"strconv"
	"strings"
)

// String is the wire form of an eviction that the drivers announce: the
// fence, a space, the name ("FENCE NAME"). Names may contain spaces; the
// fence never does.
func (e Eviction) String() string {
	return strconv.FormatUint(e.Fence, 10) + " " + e.Name
}

// ParseEviction reads the wire form written by Eviction.String (or by a
// backend-side statement that builds the same "FENCE NAME"); ok is false
// for anything else, which a watcher ignores. The name may be empty
// here; no lease has one.
func ParseEviction(s string) (e Eviction, ok bool) {
	f, name, found := strings.Cut(s, " ")
	fence, err := strconv.ParseUint(f, 10, 64)
	if !found || err != nil {
		return Eviction{}, false
	}
	return Eviction{Name: name, Fence: fence}, true
}
