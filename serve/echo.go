package serve

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxEcho is how many runes of a rejected value an error repeats.
const maxEcho = 64

// quoteTrunc quotes s for an error message (escaped, as %q does), cut to
// its first maxEcho runes and "…": a 60 KB owner is named, not repeated.
func quoteTrunc(s string) string {
	if utf8.RuneCountInString(s) <= maxEcho {
		return strconv.Quote(s)
	}
	cut := 0
	for range maxEcho {
		_, n := utf8.DecodeRuneInString(s[cut:])
		cut += n
	}
	return strconv.Quote(s[:cut]) + "…"
}

// echo is one value the client sent, as the library may quote it in an
// error (its field name there, and the name the API gives it).
type echo struct {
	libField, field, value string
}

// reworded is an error whose message was rewritten for the wire; Is and
// As still see the original.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// scrub rewrites the library's quotes of the values in err's message:
// each cut to maxEcho runes, under the API's own field name (a
// campaign's value is the library's owner).
func scrub(err error, values ...echo) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, v := range values {
		if v.value == "" {
			continue
		}
		// The library may quote the value whole or already cut.
		for _, q := range []string{strconv.Quote(v.value), quoteTrunc(v.value)} {
			if v.libField != "" {
				msg = strings.ReplaceAll(msg, v.libField+" "+q, v.field+" "+quoteTrunc(v.value))
			}
			msg = strings.ReplaceAll(msg, q, quoteTrunc(v.value))
		}
	}
	if msg == err.Error() {
		return err
	}
	return &reworded{msg: msg, err: err}
}
