package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"strings"
)

// The page is one HTML document with its style and script inline: no
// request but the API's, and nothing from the internet.
//
//go:embed page/index.html page/app.css page/app.js
var pageFiles embed.FS

// page is the assembled document and the Content-Security-Policy that
// admits exactly its own style and script (by hash) and API calls to
// this origin.
var page, pageCSP = assemblePage()

func assemblePage() ([]byte, string) {
	read := func(name string) string {
		b, err := pageFiles.ReadFile("page/" + name)
		if err != nil {
			panic(err) // embedded: present or the build failed
		}
		return string(b)
	}
	css, js := read("app.css"), read("app.js")
	html := strings.NewReplacer("/*STYLE*/", css, "/*SCRIPT*/", js).Replace(read("index.html"))
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; style-src " + hash(css) + "; script-src " + hash(js) +
		"; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	return []byte(html), csp
}

func servePage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(page)
}
