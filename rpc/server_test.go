package rpc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// rawREQ connects a plain REQ socket, as a Python client would use.
func rawREQ(t testing.TB, addr string) *zmq.Socket {
	t.Helper()
	sock, err := zmq.NewSocket(zmq.REQ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	for _, err := range []error{
		sock.SetLinger(0),
		sock.SetRcvtimeo(5 * time.Second),
		sock.Connect("tcp://" + addr),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return sock
}

type rawReply struct {
	Ok    any    `msgpack:"ok"`
	Error *Error `msgpack:"error"`
}

func rawRoundTrip(t *testing.T, sock *zmq.Socket, frames ...[]byte) rawReply {
	t.Helper()
	parts := make([]any, len(frames))
	for i, f := range frames {
		parts[i] = f
	}
	if _, err := sock.SendMessage(parts...); err != nil {
		t.Fatalf("send: %v", err)
	}
	b, err := sock.RecvBytes(0)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	var r rawReply
	if err := msgpack.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply % x is not msgpack: %v", b, err)
	}
	return r
}

func TestServerBadInput(t *testing.T) {
	const maxPayload = 1024
	s := startServer(t, ServerOptions{MaxPayload: maxPayload})
	sock := rawREQ(t, s.Addr())
	good := mustMarshal(t, []any{"add", map[string]int{"a": 1, "b": 2}})
	req := func(v ...any) []byte { return mustMarshal(t, v) }

	tests := []struct {
		name     string
		frames   [][]byte
		wantType string // "" means success
		wantOk   any
	}{
		{"not msgpack", [][]byte{{0xc1, 0xff}}, ErrTypeBadRequest, nil},
		{"text", [][]byte{[]byte("hello")}, ErrTypeBadRequest, nil},
		{"empty frame", [][]byte{{}}, ErrTypeBadRequest, nil},
		{"string", [][]byte{mustMarshal(t, "ping")}, ErrTypeBadRequest, nil},
		{"array of 1", [][]byte{req("ping")}, ErrTypeBadRequest, nil},
		{"array of 3", [][]byte{req("ping", map[string]any{}, 1)}, ErrTypeBadRequest, nil},
		{"int command", [][]byte{req(1, map[string]any{})}, ErrTypeBadRequest, nil},
		{"int kwargs", [][]byte{req("ping", 5)}, ErrTypeBadRequest, nil},
		{"truncated", [][]byte{good[:len(good)-1]}, ErrTypeBadRequest, nil},
		{"trailing bytes", [][]byte{append(slices.Clone(good), 0x01)}, ErrTypeBadRequest, nil},
		{"multi-frame", [][]byte{good, good}, ErrTypeBadRequest, nil},
		{"unknown command", [][]byte{req("nope", nil)}, ErrTypeUnknownCommand, nil},
		{"wrong kwargs type", [][]byte{req("add", map[string]string{"a": "x"})}, ErrTypeBadArguments, nil},
		{"oversized", [][]byte{req("ping", map[string]string{"pad": strings.Repeat("x", 2*maxPayload)})}, ErrTypePayloadTooLarge, nil},
		{"handler panic", [][]byte{req("panic", nil)}, ErrTypeHandlerPanic, nil},
		{"handler error", [][]byte{req("fail", nil)}, ErrTypeHandlerError, nil},
		{"custom error", [][]byte{req("custom", nil)}, "not_ready", nil},
		{"nil kwargs", [][]byte{req("ping", nil)}, "", "pong"},
		{"bin command", [][]byte{req([]byte("ping"), nil)}, "", "pong"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawRoundTrip(t, sock, tt.frames...)
			switch {
			case tt.wantType == "" && (r.Error != nil || r.Ok != tt.wantOk):
				t.Errorf("reply = {ok: %v, error: %v}, want ok %v", r.Ok, r.Error, tt.wantOk)
			case tt.wantType != "" && (r.Error == nil || r.Error.Type != tt.wantType):
				t.Errorf("reply = {ok: %v, error: %v}, want error type %q", r.Ok, r.Error, tt.wantType)
			}
			// The server must go on serving after every bad request.
			after := rawRoundTrip(t, sock, good)
			if after.Error != nil {
				t.Fatalf("good request after %s: %v", tt.name, after.Error)
			}
			if sum := after.Ok.(map[string]any)["sum"]; sum != int8(3) {
				t.Fatalf("good request after %s: ok = %v", tt.name, after.Ok)
			}
		})
	}
}

func TestRegister(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	h := func(context.Context, Args) (any, error) { return nil, nil }
	if err := s.Mux().Handle("ping", h); !errors.Is(err, ErrDuplicateCommand) {
		t.Errorf("duplicate Register = %v, want ErrDuplicateCommand", err)
	}
	if err := s.Mux().Handle("", h); err == nil {
		t.Error("Register with empty command succeeded")
	}
	if err := s.Mux().Handle("x", nil); err == nil {
		t.Error("Register with nil handler succeeded")
	}
	want := []string{"add", "custom", "fail", "nothing", "panic", "ping", "sleep"}
	if got := s.Mux().Commands(); !slices.Equal(got, want) {
		t.Errorf("Commands = %v, want %v", got, want)
	}
}

func TestNewServerAddr(t *testing.T) {
	port := freePort(t)
	tests := []struct {
		name    string
		opts    ServerOptions
		want    string // "" means any port on 127.0.0.1
		wantErr bool
	}{
		{"random port", ServerOptions{}, "", false},
		{"fixed port", ServerOptions{Host: "127.0.0.1", Port: port}, loopback(port), false},
		{"bad port", ServerOptions{Port: 70000}, "", true},
		{"bad host", ServerOptions{Host: "no such host"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewServer(tt.opts)
			if tt.wantErr {
				if err == nil {
					s.Close()
					t.Fatal("NewServer succeeded, want error")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewServer: %v", err)
			}
			defer s.Close()
			if got := s.Addr(); (tt.want != "" && got != tt.want) || !strings.HasPrefix(got, "127.0.0.1:") {
				t.Errorf("Addr = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHandleRequests drives the server the way a worker loop does.
func TestHandleRequests(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	ctx := timeout(t, 5*time.Second)

	if n, err := s.HandleRequests(ctx, 0); n != 0 || err != nil {
		t.Fatalf("HandleRequests on idle server = %d, %v; want 0, nil", n, err)
	}
	if ready, err := s.WaitRequest(ctx, 20*time.Millisecond); ready || err != nil {
		t.Fatalf("WaitRequest on idle server = %v, %v; want false, nil", ready, err)
	}

	const clients = 3
	errs := make(chan error, clients)
	for i := range clients {
		c := dial(t, s.Addr(), ClientOptions{})
		go func() {
			var r addReply
			err := c.Request(ctx, "add", addArgs{A: i, B: 1}, &r)
			if err == nil && r.Sum != i+1 {
				err = errors.New("wrong sum")
			}
			errs <- err
		}()
	}
	answered := 0
	for answered < clients {
		ready, err := s.WaitRequest(ctx, time.Second)
		if err != nil || !ready {
			t.Fatalf("WaitRequest = %v, %v; want a request", ready, err)
		}
		n, err := s.HandleRequests(ctx, 1)
		if err != nil || n > 1 {
			t.Fatalf("HandleRequests(max 1) = %d, %v", n, err)
		}
		answered += n
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Errorf("Request: %v", err)
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if ready, err := s.WaitRequest(cancelled, time.Second); ready || !errors.Is(err, context.Canceled) {
		t.Errorf("WaitRequest with cancelled ctx = %v, %v", ready, err)
	}
}

func TestServeReturnsOnCancel(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	// An answered request: Serve is in its loop.
	if err := dial(t, s.Addr(), ClientOptions{}).Request(timeout(t, 5*time.Second), "ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestServerClose(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	ctx := timeout(t, 5*time.Second)
	// A handler may close its own server: the reply still goes out, and
	// the socket closes once HandleRequests returns.
	if err := s.Mux().Handle("close", func(context.Context, Args) (any, error) { return "bye", s.Close() }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()

	c := dial(t, s.Addr(), ClientOptions{})
	var got string
	if err := c.Request(ctx, "close", nil, &got); err != nil || got != "bye" {
		t.Fatalf("Request(close) = %q, %v", got, err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v, want ErrClosed", err)
	}
	if _, err := s.HandleRequests(ctx, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("HandleRequests after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	// The port is free again, although libzmq releases it asynchronously.
	port := atoi(t, s.Addr()[strings.LastIndex(s.Addr(), ":")+1:])
	for deadline := time.Now().Add(2 * time.Second); ; {
		s2, err := NewServer(ServerOptions{Port: port, Logger: quietLogger})
		if err == nil {
			s2.Close()
			break
		}
		if !errors.Is(err, zmq.EADDRINUSE) || time.Now().After(deadline) {
			t.Fatalf("rebind after Close: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The Mux's observer hears of every request dispatched to it, with the
// outcome on the wire; a request that never reached it (malformed,
// oversized) is not its to count, and an unknown command is reported
// without its name.
func TestMuxObserver(t *testing.T) {
	s := startServer(t, ServerOptions{MaxPayload: 1024})
	var mu sync.Mutex
	var seen [][2]string
	s.Mux().SetObserver(func(command, outcome string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, [2]string{command, outcome})
	})
	sock := rawREQ(t, s.Addr())
	req := func(v ...any) []byte { return mustMarshal(t, v) }
	for _, tc := range []struct {
		name  string
		frame []byte
		want  [][2]string
	}{
		{"ok", req("ping", nil), [][2]string{{"ping", "ok"}}},
		{"unknown command", req("nope", nil), [][2]string{{"", ErrTypeUnknownCommand}}},
		{"bad arguments", req("add", map[string]string{"a": "x"}), [][2]string{{"add", ErrTypeBadArguments}}},
		{"panic", req("panic", nil), [][2]string{{"panic", ErrTypeHandlerPanic}}},
		{"custom error", req("custom", nil), [][2]string{{"custom", "not_ready"}}},
		{"malformed", []byte("hello"), nil},
		{"oversized", req("ping", map[string]string{"pad": strings.Repeat("x", 4096)}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			rawRoundTrip(t, sock, tc.frame)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tc.want) {
				t.Errorf("observed %v, want %v", seen, tc.want)
			}
		})
	}
}
