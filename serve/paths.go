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
