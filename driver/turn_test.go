package driver

import (
	"testing"
	"time"
)

// TestTurnSince: a hand-off's backend time maps to the last attempt's
// send time plus the backend time elapsed since that attempt ran; never
// to before the send time (a backend time before the attempt ran), and
// never to the future.
func TestTurnSince(t *testing.T) {
	sent := time.Now().Add(-time.Second)
	at := Turn{Sent: sent, Ran: 1_000_000}
	if got := at.Since(1_250_000); !got.Equal(sent.Add(250 * time.Millisecond)) {
		t.Errorf("Since 250 ms after the attempt ran = %v after the send, want 250ms", got.Sub(sent))
	}
	if got := at.Since(900_000); !got.Equal(sent) {
		t.Errorf("Since before the attempt ran = %v after the send, want the send time", got.Sub(sent))
	}
	if got := at.Since(1_000_000 + time.Hour.Microseconds()); got.After(time.Now()) {
		t.Errorf("Since an hour after the attempt ran is in the future: %v", got)
	}
}
