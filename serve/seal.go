package serve

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A lease_id is the lease itself, sealed: the library's lease handle
// (Lease.Handle: backend key, token, fence, owner, TTL), the client it
// belongs to, a semaphore's size and the grant time, encrypted and
// authenticated with AES-256-GCM under a key the replicas share
// (Config.LeaseKeys). Any replica that holds the key can open it and
// adopt the lease (Locker.Resume); a client cannot read it (the token is
// inside) nor forge or alter one (the seal would not open). So nothing a
// replica must know about a lease lives only in its memory, and the
// backend needs no table of its own: the backend already holds the lock,
// and the id holds the rest. The alternative, a lease table in the
// backend, would cost a write per grant and a schema per backend, for the
// same result.
//
// Rotation: the first key seals new ids; every key opens. Add a new key
// in front, restart the replicas one by one, and drop the old key once
// every lease sealed with it has ended.

// minLeaseKeyLen is the shortest lease key accepted: 32 characters, e.g.
// `openssl rand -hex 32` (64).
const minLeaseKeyLen = 32

// sealAD binds a seal to its purpose: a value sealed for something else
// under the same key does not open as a lease id.
var sealAD = []byte("dlock serve lease id v1")

// sealed is what a lease_id carries.
type sealed struct {
	Handle  string `json:"h"`
	Owner   string `json:"o"`
	Permits int    `json:"p,omitempty"`
	Granted int64  `json:"g"` // Unix milliseconds
}

// sealer seals and opens lease ids.
type sealer struct {
	aeads []cipher.AEAD // the first seals; all open
}

// newSealer makes a sealer from the shared keys; none means a random key
// of this process alone (its ids open nowhere else, nor after a restart).
func newSealer(keys [][]byte) (*sealer, error) {
	if len(keys) == 0 {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		keys = [][]byte{k}
	}
	s := &sealer{}
	for i, k := range keys {
		if len(k) < minLeaseKeyLen {
			return nil, fmt.Errorf("serve: lease key %d of %d is %d bytes long, want at least %d (e.g. openssl rand -hex 32)",
				i+1, len(keys), len(k), minLeaseKeyLen)
		}
		sum := sha256.Sum256(k) // any text of enough entropy becomes an AES-256 key
		block, err := aes.NewCipher(sum[:])
		if err != nil {
			return nil, err
		}
		a, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, a)
	}
	return s, nil
}

// seal makes the lease_id of v.
func (s *sealer) seal(v sealed) string {
	plain, _ := json.Marshal(v) // strings and numbers only: cannot fail
	a := s.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, plain, sealAD))
}

// errUnsealed is any lease id that does not open: malformed, altered, or
// sealed with a key this server does not have.
var errUnsealed = errors.New("lease id does not open")

// open reads a lease_id sealed with any of the keys.
func (s *sealer) open(id string) (sealed, error) {
	var v sealed
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return v, errUnsealed
	}
	for _, a := range s.aeads {
		if len(b) < a.NonceSize() {
			return v, errUnsealed
		}
		plain, err := a.Open(nil, b[:a.NonceSize()], b[a.NonceSize():], sealAD)
		if err != nil {
			continue
		}
		if json.Unmarshal(plain, &v) != nil {
			return v, errUnsealed
		}
		return v, nil
	}
	return v, errUnsealed
}

// grantedAt is the grant time a sealed id carries.
func (v sealed) grantedAt() time.Time { return time.UnixMilli(v.Granted) }
