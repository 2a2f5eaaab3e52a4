// Package dashboard is the browser dashboard of dlock serve: one HTML page,
// a script and a style sheet, embedded in the binary (no build step, no
// CDN). The page reads the server's live Snapshot from
// GET /v1/dashboard/stream (server-sent events) and falls back to polling
// GET /v1/dashboard every 2 s while the stream is down. It shows the
// holders with their fences and a local TTL countdown (and, for a holder
// another server or process granted, what the backend knows instead of
// an age), the waiters through this server per name, the recent grants,
// releases, losses and force-releases, and a fence timeline per name. An
// admin gets a force-release button per holder, confirmed in a <dialog>,
// that posts the API's own JSON request from the page's origin.
//
// The page builds its DOM with textContent and setAttribute only (lock
// names and owners are user input) and has no inline script, style or
// event handler, so it runs under a strict Content-Security-Policy, which
// Handler sends with every file (CSP: default-src 'self', no framing, forms
// to this server only).
//
// Package serve mounts Handler at / and /static/ behind its own
// authentication (Config.Dashboard).
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"time"
)

//go:embed assets
var assets embed.FS

// Handler serves the dashboard: GET / is the page (index.html) and
// GET /static/NAME its assets (app.js, style.css). Any other path is 404,
// and so is a directory. It does no authentication of its own.
func Handler() http.Handler {
	files := loadAssets()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", files["index.html"])
	mux.HandleFunc("GET /static/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if f, ok := files[name]; ok && name != "index.html" {
			f.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	return mux
}

// CSP is the dashboard's Content-Security-Policy: its own files only, no
// inline code, no plugin, no framing (also X-Frame-Options: DENY), forms
// posting to this server only.
const CSP = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"

// asset is one embedded file with its media type and a strong ETag.
type asset struct {
	name, contentType, etag string
	body                    []byte
}

// loadAssets reads the embedded files once. The assets folder is flat; a
// file that cannot be read is a broken build, hence the panic.
func loadAssets() map[string]*asset {
	entries, err := assets.ReadDir("assets")
	if err != nil {
		panic("dashboard: embedded assets: " + err.Error())
	}
	files := make(map[string]*asset, len(entries))
	for _, e := range entries {
		body, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			panic("dashboard: embedded asset " + e.Name() + ": " + err.Error())
		}
		sum := sha256.Sum256(body)
		files[e.Name()] = &asset{
			name:        e.Name(),
			contentType: contentType(e.Name()),
			etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
			body:        body,
		}
	}
	return files
}

// ServeHTTP writes the file; http.ServeContent answers If-None-Match with
// 304 and HEAD without a body.
func (a *asset) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	// The assets change only with the binary; no-cache makes the browser
	// revalidate (a cheap 304), so an upgrade shows at the next load.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}

// contentType is the media type of an asset by its extension, with an
// explicit charset: the page and its script carry non-ASCII text.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}
