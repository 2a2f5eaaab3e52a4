package serve

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Bounds of the dashboard's sign-ins.
const (
	sessionTTL = 12 * time.Hour
	// maxSessions bounds the store; past it the oldest session ends.
	maxSessions = 10000
	// maxSessionsPerToken bounds one token's sessions; past it that
	// token's own oldest ends, so that signing in again and again with
	// one token never signs anyone else out.
	maxSessionsPerToken = 100
)

// session is a signed-in browser.
type session struct {
	role    role
	who     string
	expires time.Time
}

// sessionStore keeps the sessions by id, oldest first overall and per
// token (all have the same TTL, so the oldest also expires first).
type sessionStore struct {
	mu    sync.Mutex
	byID  map[string]*sessionEntry
	all   *list.List            // of *sessionEntry, oldest first
	byWho map[string]*list.List // of *sessionEntry, oldest first
}

type sessionEntry struct {
	id        string
	s         session
	all, mine *list.Element
}

func newSessionStore() *sessionStore {
	return &sessionStore{byID: map[string]*sessionEntry{}, all: list.New(), byWho: map[string]*list.List{}}
}

// add starts a session and returns its id: 128 bits from crypto/rand.
func (st *sessionStore) add(rl role, who string, now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	e := &sessionEntry{id: hex.EncodeToString(b[:]), s: session{role: rl, who: who, expires: now.Add(sessionTTL)}}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire(now)
	mine := st.byWho[who]
	if mine == nil {
		mine = list.New()
		st.byWho[who] = mine
	}
	if mine.Len() >= maxSessionsPerToken {
		st.removeLocked(mine.Front().Value.(*sessionEntry))
	}
	if st.all.Len() >= maxSessions {
		st.removeLocked(st.all.Front().Value.(*sessionEntry))
	}
	e.all, e.mine = st.all.PushBack(e), mine.PushBack(e)
	st.byID[e.id] = e
	return e.id
}

// get returns the session id names, if it has not expired.
func (st *sessionStore) get(id string, now time.Time) (session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.byID[id]
	if !ok || !now.Before(e.s.expires) {
		return session{}, false
	}
	return e.s, true
}

// remove ends a session (sign-out).
func (st *sessionStore) remove(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if e, ok := st.byID[id]; ok {
		st.removeLocked(e)
	}
}

// expire drops the expired sessions, all at the front (st.mu held).
func (st *sessionStore) expire(now time.Time) {
	for f := st.all.Front(); f != nil && !now.Before(f.Value.(*sessionEntry).s.expires); f = st.all.Front() {
		st.removeLocked(f.Value.(*sessionEntry))
	}
}

func (st *sessionStore) removeLocked(e *sessionEntry) {
	delete(st.byID, e.id)
	st.all.Remove(e.all)
	mine := st.byWho[e.s.who]
	mine.Remove(e.mine)
	if mine.Len() == 0 {
		delete(st.byWho, e.s.who)
	}
}
