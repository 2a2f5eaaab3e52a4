package dlockotel

import (
	"time"

	"github.com/dlockdev/dlock"
	"go.opentelemetry.io/otel/attribute"
)

// The attribute keys of the spans and metrics. A lease's token and owner
// are never recorded: the token is the secret that releases the lock, and
// the owner (host/pid, or what WithOwner gave) may say more than a trace
// should.
const (
	keyBackend    = attribute.Key("dlock.backend")
	keyName       = attribute.Key("dlock.name")
	keyKind       = attribute.Key("dlock.kind")
	keyWait       = attribute.Key("dlock.wait_ms")
	keyWaited     = attribute.Key("dlock.waited_ms")
	keyOutcome    = attribute.Key("dlock.outcome")
	keyFence      = attribute.Key("dlock.fence")
	keyHeld       = attribute.Key("dlock.held_ms")
	keyLostReason = attribute.Key("dlock.lost.reason")
	keyRefresh    = attribute.Key("dlock.refresh.result")
	keyEndReason  = attribute.Key("dlock.end.reason")
	keyErrMessage = attribute.Key("error.message")
)

// millis is d in whole milliseconds; dlock.Forever (no wait bound) is -1,
// as in the HTTP API's wait_ms.
func millis(d time.Duration) int64 {
	if d == dlock.Forever {
		return -1
	}
	return d.Milliseconds()
}

// fence is a lease's fence as an attribute (int64: OpenTelemetry has no
// unsigned integers; a fence never comes near 2^63).
func fence(ls *dlock.Lease) attribute.KeyValue {
	return keyFence.Int64(int64(ls.Fence()))
}
