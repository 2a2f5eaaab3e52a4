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

// TestOpenAPIRefsResolve: every $ref in openapi.json names a component
// that exists, and every {param} of a path is declared.
func TestOpenAPIRefsResolve(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(serve.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if ref, ok := x.(string); ok && k == "$ref" && resolve(doc, ref) == nil {
					t.Errorf("%s: $ref %q resolves to nothing", at, ref)
				}
				walk(x, at+"/"+k)
			}
		case []any:
			for _, x := range v {
				walk(x, at)
			}
		}
	}
	walk(doc, "#")
	for path, ops := range doc["paths"].(map[string]any) {
		for method, op := range ops.(map[string]any) {
			declared := map[string]bool{}
			params, _ := op.(map[string]any)["parameters"].([]any)
			for _, p := range params {
				declared[p.(map[string]any)["name"].(string)] = true
			}
			for _, seg := range strings.Split(path, "/") {
				if name, ok := strings.CutPrefix(seg, "{"); ok && !declared[strings.TrimSuffix(name, "}")] {
					t.Errorf("%s %s: path parameter %s is not declared", method, path, seg)
				}
			}
		}
	}
}

// resolve follows a local JSON pointer ("#/components/schemas/Lease").
func resolve(doc map[string]any, ref string) any {
	var v any = doc
	for _, k := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
