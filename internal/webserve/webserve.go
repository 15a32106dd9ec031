package webserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Limits of every server. A scrape or a page is small and quick: these
// bound what a client that is neither can hold.
const (
	// MaxHeaderBytes bounds a request's headers; more is refused (431).
	MaxHeaderBytes = 16 << 10
	// MaxConns bounds the connections open at once; more wait in the
	// kernel's accept queue.
	MaxConns = 64
	// ReadHeaderTimeout closes a connection that has not sent its headers
	// in time (a slowloris client).
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request, WriteTimeout writing a
	// reply, IdleTimeout a kept-alive connection's wait for the next.
	ReadTimeout  = 10 * time.Second
	WriteTimeout = 30 * time.Second
	IdleTimeout  = 60 * time.Second
)

// Server is an HTTP server bound to one address.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Listen binds addr ("host:port"; port 0 picks one) and serves h on it
// until Close.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webserve: listen %s: %w", addr, err)
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			MaxHeaderBytes:    MaxHeaderBytes,
			ReadHeaderTimeout: ReadHeaderTimeout,
			ReadTimeout:       ReadTimeout,
			WriteTimeout:      WriteTimeout,
			IdleTimeout:       IdleTimeout,
			// A client's protocol errors are its own: one line at debug.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		ln:   netutil.LimitListener(ln, MaxConns),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return s, nil
}

// Addr is the bound "host:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server: requests in flight get a second to finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

// IsLoopback reports whether addr ("host:port") binds only loopback: an
// empty or unspecified host binds every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
