package cli

import (
	"encoding/json"
	"fmt"
	"io"
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
}

func recordOf(h dlock.Holder) holderRecord {
	left := h.TTL.Milliseconds()
	if h.TTL < 0 {
		left = -1
	}
	return holderRecord{Name: h.Name, Held: true, Owner: h.Owner, Fence: h.Fence, TTLLeftMS: left}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeHolderTable prints holders as an aligned table.
func writeHolderTable(w io.Writer, hs []dlock.Holder) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tOWNER\tFENCE\tTIME LEFT")
	for _, h := range hs {
		left := "no expiry"
		if h.TTL >= 0 {
			left = roundLeft(h.TTL).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", h.Name, h.Owner, h.Fence, left)
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
