package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// NewToken returns 128 random bits in hex: the token of a dashboard
// bound beyond loopback when none is given.
func NewToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+): it crashes the program instead
	return hex.EncodeToString(b)
}

// requireToken lets through only requests that carry token, as
// "Authorization: Bearer TOKEN" or "?token=TOKEN"; the others get 401 and
// one line. An empty token lets everything through.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.URL.Query().Get("token")
		if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = strings.TrimSpace(auth)
		}
		// Constant time: how long a refusal takes says nothing of how
		// much of a guess was right.
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="distrl dashboard"`)
			http.Error(w, "dashboard: a token is required (Authorization: Bearer TOKEN, or ?token=TOKEN)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
