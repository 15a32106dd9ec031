package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type addArgs struct {
	A int `msgpack:"a"`
	B int `msgpack:"b"`
}

type addReply struct {
	Sum int `msgpack:"sum"`
}

type sleepArgs struct {
	Ms int `msgpack:"ms"`
}

var quietLogger = slog.New(slog.DiscardHandler)

// newTestServer returns a server on a random loopback port with the test
// commands registered; it is closed at cleanup.
func newTestServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	handlers := map[string]Handler{
		"ping":    func(context.Context, Args) (any, error) { return "pong", nil },
		"nothing": func(context.Context, Args) (any, error) { return nil, nil },
		"add": Typed(func(_ context.Context, a addArgs) (addReply, error) {
			return addReply{Sum: a.A + a.B}, nil
		}),
		"sleep": Typed(func(ctx context.Context, a sleepArgs) (int, error) {
			time.Sleep(time.Duration(a.Ms) * time.Millisecond)
			return a.Ms, nil
		}),
		"panic":  func(context.Context, Args) (any, error) { panic("kaboom") },
		"fail":   func(context.Context, Args) (any, error) { return nil, errors.New("boom") },
		"custom": func(context.Context, Args) (any, error) { return nil, Errorf("not_ready", "try %s", "later") },
	}
	if err := s.Mux().HandleAll(handlers); err != nil {
		t.Fatalf("register the test commands: %v", err)
	}
	return s
}

// startCountingServer serves, on port, a "count" command that answers how
// many times it has run: a request that was delivered late shows in it.
func startCountingServer(t testing.TB, port int) {
	t.Helper()
	s := newTestServer(t, ServerOptions{Port: port})
	var count atomic.Int32
	if err := s.Mux().Handle("count", func(context.Context, Args) (any, error) { return count.Add(1), nil }); err != nil {
		t.Fatal(err)
	}
	serve(t, s)
}

// serve runs s.Serve in a goroutine until cleanup.
func serve(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// startServer is newTestServer plus serve.
func startServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	s := newTestServer(t, opts)
	serve(t, s)
	return s
}

func dial(t testing.TB, addr string, opts ClientOptions) *Client {
	t.Helper()
	c, err := Dial(addr, opts)
	if err != nil {
		t.Fatalf("Dial(%q): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func timeout(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
