package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// maxKeys is how many keys topKeys remembers without allocating (a body
// type has at most four).
const maxKeys = 8

// topKeys checks the keys of the well-formed JSON value data (json.Valid
// holds): it must be an object, each key one of known, none twice. It
// reads the bytes once and allocates only for an error, or a key written
// with escapes.
func topKeys(data []byte, known map[string]bool) error {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) == 0 || data[0] != '{' {
		return errors.New("want a JSON object")
	}
	var seenAt [maxKeys][]byte
	seen := seenAt[:0]
	depth, wantKey := 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := stringEnd(data, i)
			if depth == 1 && wantKey {
				name, err := checkKey(data[i:end+1], known, seen)
				if err != nil {
					return err
				}
				seen = append(seen, name)
				wantKey = false
			}
			i = end
		case '{', '[':
			depth++
			wantKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			wantKey = depth == 1
		}
	}
	return nil
}

// checkKey returns the name of the quoted key q as encoding/json reads
// it (escapes read, invalid UTF-8 replaced), refusing it if it is
// unknown or among seen.
func checkKey(q []byte, known map[string]bool, seen [][]byte) ([]byte, error) {
	name := q[1 : len(q)-1]
	if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
		var s string
		if err := json.Unmarshal(q, &s); err != nil {
			return nil, err
		}
		name = []byte(s)
	}
	if !known[string(name)] {
		return nil, fmt.Errorf("unknown field %s", quoteTrunc(string(name)))
	}
	for _, k := range seen {
		if bytes.Equal(k, name) {
			return nil, fmt.Errorf("field %q given twice", name)
		}
	}
	return name, nil
}

// stringEnd is the index of the quote that closes the JSON string opening
// at data[open].
func stringEnd(data []byte, open int) int {
	for i := open + 1; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(data) - 1 // not reached: data is well-formed
}
