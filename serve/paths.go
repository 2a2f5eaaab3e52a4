package serve

import (
	"fmt"
	"net/http"
	"strings"
)

// The ServeMux answers a path with an empty segment, "." or ".." by a
// redirect to the cleaned path: POST /v1/locks//acquire, from a client
// whose name variable was empty, would be sent to POST /v1/locks/acquire,
// and GET /v1/locks/a/.. to the list of every lock. The server answers
// such a path 400 instead, naming what is wrong, and never redirects.

// namedSegments are the path segments (after /v1/) that a name or id
// follows, with what that name is called.
var namedSegments = map[string]string{
	"locks":      "lock name",
	"semaphores": "semaphore name",
	"elections":  "election name",
	"leases":     "lease id",
}

// uncleanPath answers 400 when r's path is not in the form the routes
// match (see above); false means it did not answer.
func uncleanPath(w http.ResponseWriter, r *http.Request) bool {
	detail := pathFault(r.URL.EscapedPath())
	if detail == "" || r.Method == http.MethodConnect {
		return false
	}
	writeProblem(w, http.StatusBadRequest, "invalid-argument", "Invalid argument", detail)
	return true
}

// pathFault says what is wrong with the escaped path p: an empty, "." or
// ".." segment, or an empty name where /v1/locks/ and its kin expect
// one; "" if nothing is. A name "." or ".." is sent percent-encoded
// (%2E), as url.PathEscape does not.
func pathFault(p string) string {
	if cleanPath(p) {
		return ""
	}
	return describeFault(p)
}

// describeFault is pathFault, for a path that may have a fault.
func describeFault(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	what := ""
	if len(segs) >= 3 && segs[0] == "v1" {
		what = namedSegments[segs[1]]
	}
	if what != "" {
		switch f := fault(segs[2], false); f {
		case "":
		case "empty":
			return fmt.Sprintf("the %s in path %s is empty", what, quoteTrunc(p))
		default:
			return fmt.Sprintf("the %s in path %s is %s: paths are taken as sent, neither cleaned nor redirected (a name %q or %q is sent percent-encoded: %%2E)", what, quoteTrunc(p), f, ".", "..")
		}
	}
	for i, seg := range segs {
		if f := fault(seg, i == len(segs)-1); f != "" {
			return fmt.Sprintf("path %s has a segment that is %s: paths are taken as sent, neither cleaned nor redirected", quoteTrunc(p), f)
		}
	}
	return ""
}

// cleanPath reports, without allocating, that pathFault finds nothing in
// p: no segment is empty (but a trailing one), "." or "..", and a name
// follows /v1/locks/ and its kin.
func cleanPath(p string) bool {
	rest := strings.TrimPrefix(p, "/")
	for i := 0; ; i++ {
		seg, after, more := strings.Cut(rest, "/")
		if seg == "." || seg == ".." || (seg == "" && more) || (seg == "" && i == 2 && named(p)) {
			return false
		}
		if !more {
			return true
		}
		rest = after
	}
}

// named reports whether p's third segment is a name or id: p is
// /v1/locks/..., /v1/leases/... or their kin.
func named(p string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(p, "/"), "v1/")
	kind, _, _ := strings.Cut(rest, "/")
	return ok && namedSegments[kind] != ""
}

// fault says what is wrong with one path segment: "empty" (unless
// emptyOK: a trailing slash), or the dot segment quoted; "" if nothing.
func fault(seg string, emptyOK bool) string {
	switch {
	case seg == "" && !emptyOK:
		return "empty"
	case seg == "." || seg == "..":
		return fmt.Sprintf("%q", seg)
	}
	return ""
}
