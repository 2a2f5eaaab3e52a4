package dlock

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// handleVersion is the first byte of an encoded handle: a Locker refuses a
// handle of a version it does not know, naming it.
const handleVersion = 1

// maxHandleLen bounds the handle Resume decodes: a name, an owner, a
// backend name and a token fit in far less.
const maxHandleLen = 4096

// handle is what Lease.Handle encodes: everything a Locker needs to adopt
// the lease.
type handle struct {
	backend string        // the driver's package name (driverName)
	key     string        // the backend key: a name, or a primitive's grant
	token   string        // the secret token
	owner   string        // the owner the lease was granted with
	fence   uint64        // the key's fence, as the backend records it
	shown   uint64        // a read grant's fence (Lease.shown); 0 otherwise
	ttl     time.Duration // the lease's TTL
}

// Handle returns an opaque, printable string (URL-safe base64) from which
// Locker.Resume, in this or another process, makes a live lease on the
// same grant: the backend, the lock's key (name, kind, permit or slot),
// the token, the fence, the owner and the TTL. It is a SECRET: it carries
// the token, so whoever has it can refresh and release the lock. Pass it
// as a secret is passed (an inherited pipe or file descriptor, an
// environment variable of a child process, a file readable only by its
// owner), and never log it. dlock never prints it: no error and no
// String method includes it.
//
// Handle does not change the lease: this Locker keeps refreshing it, and
// releases it on Release or Close — also once a Locker that resumed it
// holds it, since both then hold the same token, and also when the lease
// was lost here first. A process that hands the lease on and goes on
// living calls Detach instead.
func (ls *Lease) Handle() string {
	return handle{
		backend: driverName(ls.host.driver()), key: ls.name, token: ls.token, owner: ls.owner,
		fence: ls.fence, shown: ls.shown.Load(), ttl: ls.TTL(),
	}.encode()
}

func (h handle) encode() string {
	b := []byte{handleVersion}
	for _, s := range []string{h.backend, h.key, h.token, h.owner} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, h.fence)
	b = binary.AppendUvarint(b, h.shown)
	b = binary.AppendUvarint(b, uint64(h.ttl))
	return base64.RawURLEncoding.EncodeToString(b)
}

// errBadHandle is wrapped by every error about a malformed handle. The
// errors name the part that is wrong and never quote the handle, which
// carries the token.
var errBadHandle = errors.New("malformed lease handle")

// decodeHandle takes a handle apart and checks each part.
func decodeHandle(s string) (handle, error) {
	if s == "" {
		return handle{}, invalid("%v: it is empty", errBadHandle)
	}
	if len(s) > maxHandleLen {
		return handle{}, invalid("%v: %d bytes, longer than the %d a handle can be", errBadHandle, len(s), maxHandleLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return handle{}, invalid("%v: not URL-safe base64 without padding (a %d-byte string; was it cut or wrapped?)", errBadHandle, len(s))
	}
	if b[0] != handleVersion {
		return handle{}, invalid("%v: version %d, this dlock reads version %d (made by another dlock release?)", errBadHandle, b[0], handleVersion)
	}
	r := handleReader{b: b[1:]}
	h := handle{backend: r.str("backend"), key: r.str("lock name"), token: r.str("token"), owner: r.str("owner")}
	h.fence, h.shown = r.num("fence"), r.num("read fence")
	h.ttl = time.Duration(r.num("TTL"))
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes after the TTL", len(r.b))
	}
	if r.err != nil {
		return handle{}, invalid("%v: %v", errBadHandle, r.err)
	}
	return h, h.check()
}

// check validates a decoded handle's parts.
func (h handle) check() error {
	ki := parseKey(h.key)
	if err := validName(ki.name); err != nil {
		return invalid("%v: its lock name: %v", errBadHandle, unwrapInvalid(err))
	}
	switch ki.kind {
	case KindMutex, KindPermit, KindRead, KindWrite, KindLeader:
	default:
		return invalid("%v: lock %q has an unknown kind %q", errBadHandle, ki.name, ki.kind)
	}
	hd := Holder{Name: ki.name, Kind: ki.kind, Permits: ki.permits, Slot: ki.slot}
	if hd.backendKey() != h.key || !validSlot(ki) {
		return invalid("%v: lock %q: its %s key is not one dlock makes", errBadHandle, ki.name, ki.kind)
	}
	if len(h.owner) > 256 || !printable(h.owner) {
		return invalid("%v: lock %q: its owner is not up to 256 bytes of printable text", errBadHandle, ki.name)
	}
	if !validToken(h.token) {
		return invalid("%v: lock %q: its token is not 32 hex digits", errBadHandle, ki.name)
	}
	if h.ttl < MinTTL || h.ttl > MaxTTL {
		return invalid("%v: lock %q: TTL %v is outside [%v, %v]", errBadHandle, ki.name, h.ttl, MinTTL, MaxTTL)
	}
	if h.backend == "" {
		return invalid("%v: lock %q: no backend", errBadHandle, ki.name)
	}
	return nil
}

// validSlot reports whether a permit's or read grant's numbers are in
// range.
func validSlot(ki keyInfo) bool {
	switch ki.kind {
	case KindPermit:
		return ki.permits > 0 && ki.slot >= 0 && ki.slot < ki.permits
	case KindRead:
		return ki.slot >= 0 && ki.slot < MaxReaders
	}
	return true
}

// validToken reports whether t has the form newToken gives.
func validToken(t string) bool {
	if len(t) != 32 {
		return false
	}
	for _, c := range []byte(t) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// unwrapInvalid is err's text without the ErrInvalidArgument prefix.
func unwrapInvalid(err error) string {
	s := err.Error()
	if p := ErrInvalidArgument.Error() + ": "; len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// handleReader reads a handle's fields in order; the first failure sticks
// and names the field.
type handleReader struct {
	b   []byte
	err error
}

func (r *handleReader) num(field string) uint64 {
	if r.err != nil {
		return 0
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = fmt.Errorf("its %s is cut short or too large", field)
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *handleReader) str(field string) string {
	n := r.num(field + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("its %s is cut short (%d bytes announced, %d left)", field, n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// String describes the lease for people and logs, e.g. `mutex "jobs"
// (fence 7)` or `permit 2 of semaphore "pool" (fence 3)`. It never
// includes the token or the handle.
func (ls *Lease) String() string {
	ki := parseKey(ls.name)
	switch ki.kind {
	case KindPermit:
		return fmt.Sprintf("permit %d of semaphore %q (fence %d)", ki.slot, ki.name, ls.Fence())
	case KindRead:
		return fmt.Sprintf("read grant %d of read-write lock %q (fence %d)", ki.slot, ki.name, ls.Fence())
	}
	return fmt.Sprintf("%s %q (fence %d)", ki.kind, ki.name, ls.Fence())
}

// GoString is String, so that %#v does not print the token either.
func (ls *Lease) GoString() string { return ls.String() }
