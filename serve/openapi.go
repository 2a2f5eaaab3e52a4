package serve

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the API's OpenAPI 3.1 document, checked in beside the
// code; TestOpenAPIMatchesRoutes keeps the two in step.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document of the API (served at
// /openapi.json).
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
