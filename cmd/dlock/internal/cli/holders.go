package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dlockdev/dlock"
)

// holderRecord is a holder as `ls --json` and `inspect --json` print it.
type holderRecord struct {
	Name  string `json:"name"`
	Held  bool   `json:"held"`
	Owner string `json:"owner,omitempty"`
	Fence uint64 `json:"fence,omitempty"`
	// TTLLeftMS is the time left in milliseconds; -1 when the lock has no
	// expiry (session-bound).
	TTLLeftMS int64 `json:"ttl_left_ms,omitempty"`
	// Kind is the grant's kind (dlock.Kind): mutex, permit, queue, read,
	// write or leader.
	Kind string `json:"kind,omitempty"`
	// Permits is a permit's semaphore size.
	Permits int `json:"permits,omitempty"`
	// Slot is a permit's index (0 to permits-1) or a read grant's slot.
	Slot *int `json:"slot,omitempty"`
	// Grants, in `inspect --json` of a name held as a semaphore, read-write
	// lock or election, lists every grant held under it (the record itself
	// is the first).
	Grants []holderRecord `json:"grants,omitempty"`
}

func recordOf(h dlock.Holder) holderRecord {
	left := h.TTL.Milliseconds()
	if h.TTL < 0 {
		left = -1
	}
	r := holderRecord{Name: h.Name, Held: true, Owner: h.Owner, Fence: h.Fence, TTLLeftMS: left,
		Kind: string(h.Kind), Permits: h.Permits}
	if h.Slot >= 0 {
		r.Slot = &h.Slot
	}
	return r
}

// grantsOf returns every grant held under name: the plain lock, or the
// permits and queue of a semaphore, the grants of a read-write lock, the
// leader of an election.
func grantsOf(ctx context.Context, l *dlock.Locker, name string) ([]dlock.Holder, error) {
	h, ok, err := l.Inspect(ctx, name) // exact, even where listings lag
	switch {
	case err != nil:
		return nil, err
	case ok:
		return []dlock.Holder{h}, nil
	}
	hs, err := l.List(ctx, name)
	var out []dlock.Holder
	for _, h := range hs {
		if h.Name == name { // not another name with this one as a prefix
			out = append(out, h)
		}
	}
	return out, err
}

// ofKind returns the holders in hs of kind k.
func ofKind(hs []dlock.Holder, k dlock.Kind) []dlock.Holder {
	var out []dlock.Holder
	for _, h := range hs {
		if h.Kind == k {
			out = append(out, h)
		}
	}
	return out
}

// kindLabel is a holder's KIND column: "mutex", "permit 2/4" (permit
// index 2 of a semaphore of 4), "read 5" (read slot 5), "leader", ...
func kindLabel(h dlock.Holder) string {
	switch {
	case h.Kind == "":
		return string(dlock.KindMutex)
	case h.Kind == dlock.KindPermit:
		return fmt.Sprintf("%s %d/%d", h.Kind, h.Slot, h.Permits)
	case h.Slot >= 0:
		return string(h.Kind) + " " + strconv.Itoa(h.Slot)
	}
	return string(h.Kind)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeHolderTable prints holders as an aligned table.
func writeHolderTable(w io.Writer, hs []dlock.Holder) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tOWNER\tFENCE\tTIME LEFT")
	for _, h := range hs {
		left := "no expiry"
		if h.TTL >= 0 {
			left = roundLeft(h.TTL).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", h.Name, kindLabel(h), h.Owner, h.Fence, left)
	}
	return tw.Flush()
}

// roundLeft rounds a time left as dlock.Holder's String does: whole
// seconds above 10 s, milliseconds below.
func roundLeft(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
