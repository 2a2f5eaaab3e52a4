package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"
)

// decode reads a JSON object body into v: bounded by MaxBodyBytes, its
// keys matched exactly (encoding/json alone matches them
// case-insensitively), unknown and repeated keys refused, an empty body
// allowed (v keeps its zero value). false means it answered.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	data, err := io.ReadAll(r.Body)
	if err == nil {
		// Read in time: the connection may now stay idle as long as the
		// answer takes (a wait), without its read deadline cutting it.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		refuse(w)
		writeProblem(w, http.StatusRequestTimeout, "timeout", "Request body too slow",
			fmt.Sprintf("the request body did not arrive within %s", s.cfg.BodyReadTimeout))
		return false
	case errors.As(err, &tooBig):
		writeProblem(w, http.StatusRequestEntityTooLarge, "too-large", "Request body too large",
			fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		return false
	case err != nil:
		invalidf(w, "request body: %v", err)
		return false
	case len(bytes.TrimSpace(data)) == 0:
		return true
	}
	if err := strictUnmarshal(data, v); err != nil {
		invalidf(w, "request body: %v", err)
		return false
	}
	return true
}

// strictUnmarshal decodes one JSON object into the struct v, refusing a
// key that is not one of v's json names exactly, or that comes twice.
// A well-formed body (every request of a working client) has its keys
// checked by one scan of its bytes, then is decoded once; a malformed one
// goes through the token walk, whose errors name what is wrong.
func strictUnmarshal(data []byte, v any) error {
	known := jsonNames(reflect.TypeOf(v).Elem())
	if !json.Valid(data) {
		return strictDecode(data, v, known)
	}
	if err := topKeys(data, known); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// strictDecode is strictUnmarshal by the token walk, which names a
// malformed body's fault.
func strictDecode(data []byte, v any, known map[string]bool) error {
	if err := checkKeys(data, known); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// checkKeys walks the top level of one JSON object.
func checkKeys(data []byte, known map[string]bool) error {
	err := walkKeys(data, known)
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF // the object was open
	}
	return err
}

func walkKeys(data []byte, known map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return err
	} else if tok != json.Delim('{') {
		return errors.New("want a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string) // an object's next token is its key
		switch {
		case !known[key]:
			return fmt.Errorf("unknown field %s", quoteTrunc(key))
		case seen[key]:
			return fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// names caches jsonNames: a body type's names are read once.
var names sync.Map // reflect.Type → map[string]bool

// jsonNames lists the json names of a struct's fields, embedded structs'
// included. The map is shared: never write to it.
func jsonNames(t reflect.Type) map[string]bool {
	if m, ok := names.Load(t); ok {
		return m.(map[string]bool)
	}
	m, _ := names.LoadOrStore(t, readJSONNames(t))
	return m.(map[string]bool)
}

func readJSONNames(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k := range readJSONNames(f.Type) {
				out[k] = true
			}
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}
