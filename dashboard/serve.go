package dashboard

import (
	"log/slog"
	"net"
	"net/url"

	"github.com/distrl/distrl/internal/webserve"
)

// ServeOptions configure Listen.
type ServeOptions struct {
	// Token is required on every request. Empty: none on a loopback
	// address, a new one (NewToken) on any other.
	Token string
	// Advertise is the host put in the URL and in /sd when the address
	// binds every interface (0.0.0.0, [::]); empty: the bound address.
	Advertise string
	Logger    *slog.Logger
}

// Server is a dashboard listening on an address.
type Server struct {
	srv   *webserve.Server
	url   string
	token string
}

// Listen serves the dashboard of src at addr ("host:port", port 0 picks
// one) on a hardened server (webserve) until Close.
func Listen(addr string, src Source, opts ServeOptions) (*Server, error) {
	token := opts.Token
	if token == "" && !webserve.IsLoopback(addr) {
		token = NewToken()
	}
	h := New(src, Options{Token: token, Logger: opts.Logger})
	srv, err := webserve.Listen(addr, h, opts.Logger)
	if err != nil {
		return nil, err
	}
	self := srv.Addr()
	if host, port, err := net.SplitHostPort(self); err == nil && opts.Advertise != "" {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			self = net.JoinHostPort(opts.Advertise, port)
		}
	}
	h.SetSelf(self)
	u := "http://" + self + "/"
	if token != "" {
		u += "?" + url.Values{"token": {token}}.Encode()
	}
	return &Server{srv: srv, url: u, token: token}, nil
}

// URL is the page's address, with the token when one is required.
func (s *Server) URL() string { return s.url }

// Token is the token required, "" for none.
func (s *Server) Token() string { return s.token }

// Addr is the bound "host:port".
func (s *Server) Addr() string { return s.srv.Addr() }

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }
