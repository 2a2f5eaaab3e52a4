package dlock

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// settingsFor validates name and opts against the Locker's defaults and
// the backend's capabilities.
func (l *Locker) settingsFor(name string, opts []Option) (settings, error) {
	if err := l.usable(); err != nil {
		return settings{}, err
	}
	if err := validName(name); err != nil {
		return settings{}, err
	}
	s := l.defaults
	s.logger, s.clock = nil, nil // to see whether opts set one
	s = s.with(opts)
	if s.err != nil {
		return settings{}, s.err
	}
	if s.logger != nil {
		return settings{}, invalid("WithLogger applies to a Locker (Open, NewLocker), not to one acquire")
	}
	if s.clock != nil {
		return settings{}, invalid("WithClock applies to a Locker (Open, NewLocker), not to one acquire")
	}
	var err error
	if s.ttl, err = l.backendTTL(s.ttl); err != nil {
		return settings{}, err
	}
	return s, nil
}

// backendTTL checks a valid ttl against the backend's minimum and rounds it
// up to the backend's granularity.
func (l *Locker) backendTTL(ttl time.Duration) (time.Duration, error) {
	if l.caps.MinTTL > 0 && ttl < l.caps.MinTTL {
		if why := l.caps.MinTTLWhy; why != "" {
			return 0, invalid("ttl %s is below this backend's minimum %s: %s", ttl, l.caps.MinTTL, why)
		}
		return 0, invalid("ttl %s is below this backend's minimum %s", ttl, l.caps.MinTTL)
	}
	if g := l.caps.TTLGranularity; g > 0 && ttl%g != 0 {
		ttl = (ttl/g + 1) * g
	}
	return ttl, nil
}

func validTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return invalid("ttl %s out of range [%s, %s]", ttl, MinTTL, MaxTTL)
	}
	return nil
}

// CheckName reports whether name is a valid lock name, by the rule every
// acquire applies (an ErrInvalidArgument naming the fault): 1 to
// MaxNameLen bytes of UTF-8, not only whitespace, without control
// characters, line separators or bidirectional formatting characters.
// Tools that take a name from a
// user check it with this before they connect.
func CheckName(name string) error { return validName(name) }

func validName(name string) error {
	switch {
	case name == "":
		return invalid("lock name is empty")
	case len(name) > MaxNameLen:
		return invalid("lock name %s is %d bytes, longer than %d", quoteClip(name), len(name), MaxNameLen)
	case blank(name):
		return invalid("lock name %s is only whitespace: it would show as nothing in listings", quoteClip(name))
	case !printable(name):
		return invalid("lock name %q: want printable UTF-8 without control or bidirectional formatting characters", name)
	}
	return nil
}

// blank reports whether s is nothing but whitespace (unicode.IsSpace).
func blank(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}

// printable reports whether s is valid UTF-8 that displays as what it is:
// no control characters, no line or paragraph separators, and no
// bidirectional formatting characters (U+202E and its kin reorder what
// follows them, so that `dlock ls` or the dashboard would show one name
// as another).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return false
		}
	}
	return true
}

// maxShown bounds a value an error message quotes back.
const maxShown = 64

// clip shortens s to maxShown runes for an error message, so that a
// rejected 60 KB value is not echoed whole.
func clip(s string) string {
	if r := []rune(s); len(r) > maxShown {
		return string(r[:maxShown]) + "…"
	}
	return s
}

// quoteClip quotes s as %q does, cut to maxShown runes with "…" after
// the closing quote, so that the quote shows where the value was cut.
func quoteClip(s string) string {
	if r := []rune(s); len(r) > maxShown {
		return strconv.Quote(string(r[:maxShown])) + "…"
	}
	return strconv.Quote(s)
}

// validPrimitive checks a semaphore's, read-write lock's or election's name.
func validPrimitive(what, name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if len(name) > maxPrimitiveName {
		return invalid("%s name %.32q... is %d bytes, longer than %d", what, name, len(name), maxPrimitiveName)
	}
	return nil
}

// primitiveSettings validates a primitive's name and options once, when
// the primitive is made, so that a bad value is reported there.
func (l *Locker) primitiveSettings(what, name string, opts []Option) (settings, error) {
	if err := validPrimitive(what, name); err != nil {
		return settings{}, err
	}
	return l.settingsFor(name, opts)
}

// callSettings applies one call's options over the primitive's.
func (l *Locker) callSettings(name string, base []Option, opts []Option) (settings, error) {
	return l.settingsFor(name, append(append([]Option(nil), base...), opts...))
}
