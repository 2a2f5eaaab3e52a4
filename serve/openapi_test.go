package serve_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/serve"
)

func openLocker(t *testing.T, url string) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestOpenAPIMatchesRoutes: every route is in openapi.json, and every
// operation there is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	srv, err := serve.New(serve.Config{Locker: openLocker(t, "mem://openapi"), InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(serve.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	var routes []string
	for _, r := range srv.Routes() {
		r = strings.Replace(r, "{$}", "", 1)
		if strings.HasSuffix(r, "/static/") {
			r += "{file}"
		}
		routes = append(routes, r)
	}
	slices.Sort(documented)
	slices.Sort(routes)
	if !slices.Equal(documented, routes) {
		t.Fatalf("routes and openapi.json differ:\nroutes:     %q\ndocumented: %q", routes, documented)
	}
}
