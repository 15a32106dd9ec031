package rpc

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func TestClientRequest(t *testing.T) {
	s := startServer(t, ServerOptions{})
	c := dial(t, s.Addr(), ClientOptions{})
	ctx := timeout(t, 5*time.Second)

	var sum addReply
	if err := c.Request(ctx, "add", addArgs{A: 40, B: 2}, &sum); err != nil || sum.Sum != 42 {
		t.Fatalf("Request(add) = %+v, %v", sum, err)
	}
	var raw msgpack.RawMessage
	if err := c.Request(ctx, "ping", nil, &raw); err != nil || string(raw) != "\xa4pong" {
		t.Fatalf("Request(ping) raw = % x, %v", raw, err)
	}
	if err := c.Request(ctx, "ping", map[string]any{"ignored": true}, nil); err != nil {
		t.Fatalf("Request(ping) with nil reply = %v", err)
	}
	got := 7
	if err := c.Request(ctx, "nothing", nil, &got); err != nil || got != 0 {
		t.Fatalf("Request(nothing) = %d, %v; want 0 (nil decodes to zero)", got, err)
	}
	if err := c.Request(ctx, "ping", 5, nil); err == nil {
		t.Fatal("Request with non-map kwargs succeeded")
	}
}

func TestClientRemoteError(t *testing.T) {
	s := startServer(t, ServerOptions{})
	c := dial(t, s.Addr(), ClientOptions{})
	ctx := timeout(t, 5*time.Second)

	tests := []struct {
		command string
		kwargs  any
		want    error
	}{
		{"nope", nil, ErrUnknownCommand},
		{"add", map[string]string{"a": "x"}, ErrBadArguments},
		{"panic", nil, ErrHandlerPanic},
		{"fail", nil, ErrHandlerError},
		{"custom", nil, &Error{Type: "not_ready"}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			err := c.Request(ctx, tt.command, tt.kwargs, nil)
			var re *Error
			if !errors.As(err, &re) || !errors.Is(err, tt.want) {
				t.Errorf("Request(%s) = %v (%T), want %v", tt.command, err, err, tt.want)
			}
		})
	}
}

// TestClientDeadlineThenServer checks that a request to an absent server
// times out, is never delivered to a server that starts later, and that the
// same client then works.
func TestClientDeadlineThenServer(t *testing.T) {
	port := freePort(t)
	c := dial(t, loopback(port), ClientOptions{})

	start := time.Now()
	err := c.Request(timeout(t, 100*time.Millisecond), "count", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Request to absent server = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("deadline of 100ms took %v", d)
	}

	startCountingServer(t, port)
	var got int32
	if err := c.Request(timeout(t, 5*time.Second), "count", nil, &got); err != nil {
		t.Fatalf("Request after server start = %v", err)
	}
	if got != 1 {
		t.Errorf("count = %d, want 1: the timed-out request was delivered", got)
	}
}

func TestClientStaleReplyDropped(t *testing.T) {
	s := startServer(t, ServerOptions{})
	c := dial(t, s.Addr(), ClientOptions{})

	err := c.Request(timeout(t, 50*time.Millisecond), "sleep", sleepArgs{Ms: 200}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow Request = %v, want DeadlineExceeded", err)
	}
	var sum addReply
	if err := c.Request(timeout(t, 5*time.Second), "add", addArgs{A: 1, B: 1}, &sum); err != nil || sum.Sum != 2 {
		t.Fatalf("Request after timeout = %+v, %v", sum, err)
	}
}

func TestClientCancel(t *testing.T) {
	s := startServer(t, ServerOptions{})
	c := dial(t, s.Addr(), ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	if err := c.Request(ctx, "sleep", sleepArgs{Ms: 200}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Request = %v, want Canceled", err)
	}
	if err := c.Request(ctx, "ping", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Request with done ctx = %v, want Canceled", err)
	}
}

// TestClientBusy checks that waiting for a client busy with another request
// respects the waiter's deadline.
func TestClientBusy(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	started, release := make(chan struct{}), make(chan struct{})
	if err := s.Mux().Handle("hold", func(context.Context, Args) (any, error) {
		close(started)
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	serve(t, s)
	c := dial(t, s.Addr(), ClientOptions{})
	slow := make(chan error, 1)
	go func() { slow <- c.Request(timeout(t, 5*time.Second), "hold", nil, nil) }()
	<-started // the slow request has the client until it is released

	// The slow request holds the client until release, below: a ping that
	// ends at all before then ended at its own deadline.
	if err := c.Request(timeout(t, 50*time.Millisecond), "ping", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Request on busy client = %v, want DeadlineExceeded", err)
	}
	calls := []*Call{{Client: c, Command: "ping"}}
	Do(timeout(t, 50*time.Millisecond), calls)
	if !errors.Is(calls[0].Err, context.DeadlineExceeded) {
		t.Errorf("Do on busy client = %v, want DeadlineExceeded", calls[0].Err)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("slow Request = %v", err)
	}
}

func TestClientConcurrent(t *testing.T) {
	s := startServer(t, ServerOptions{})
	c := dial(t, s.Addr(), ClientOptions{})
	ctx := timeout(t, 10*time.Second)

	const goroutines, each = 8, 20
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var r addReply
				if err := c.Request(ctx, "add", addArgs{A: g, B: i}, &r); err != nil || r.Sum != g+i {
					t.Errorf("add(%d, %d) = %+v, %v", g, i, r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestClientClose(t *testing.T) {
	c := dial(t, loopback(freePort(t)), ClientOptions{})
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := c.Request(context.Background(), "ping", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Request after Close = %v, want ErrClosed", err)
	}
}

func TestDial(t *testing.T) {
	tests := []struct {
		address string
		want    string // "" means an error
	}{
		{"127.0.0.1:5555", "127.0.0.1:5555"},
		{"tcp://127.0.0.1:5555", "127.0.0.1:5555"},
		{"localhost:1", "localhost:1"},
		{"[::1]:5555", "[::1]:5555"},
		{"127.0.0.1", ""},
		{":5555", ""},
		{"127.0.0.1:0", ""},
		{"127.0.0.1:x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			c, err := Dial(tt.address, ClientOptions{})
			if tt.want == "" {
				if err == nil {
					c.Close()
					t.Fatalf("Dial succeeded, want error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial = %v", err)
			}
			defer c.Close()
			if got := c.Address(); got != tt.want {
				t.Errorf("Address = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCurve(t *testing.T) {
	serverKeys, err := NewCurveKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	clientKeys, err := NewCurveKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := NewCurveKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, ServerOptions{Curve: &serverKeys})

	tests := []struct {
		name    string
		opts    ClientOptions
		wantErr error
	}{
		{"right key", ClientOptions{Curve: &CurveClientKeys{ServerPublic: serverKeys.Public, Client: clientKeys}}, nil},
		{"plaintext", ClientOptions{}, context.DeadlineExceeded},
		{"wrong server key", ClientOptions{Curve: &CurveClientKeys{ServerPublic: impostor.Public, Client: clientKeys}}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, s.Addr(), tt.opts)
			d := 5 * time.Second
			if tt.wantErr != nil {
				d = 200 * time.Millisecond
			}
			var got string
			err := c.Request(timeout(t, d), "ping", nil, &got)
			if tt.wantErr == nil && (err != nil || got != "pong") {
				t.Errorf("Request = %q, %v; want pong", got, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Request = %q, %v; want %v", got, err, tt.wantErr)
			}
		})
	}
}

func TestCurveKeyFile(t *testing.T) {
	kp, err := NewCurveKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/keys.json"
	if err := WriteCurveKeyFile(path, kp); err != nil {
		t.Fatal(err)
	}
	if err := WriteCurveKeyFile(path, kp); err == nil {
		t.Fatal("overwrote an existing key file")
	}
	got, err := ReadCurveKeyFile(path)
	if err != nil || got != kp {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if ck := kp.ClientKeys(); ck.ServerPublic != kp.Public || ck.Client != kp {
		t.Fatalf("ClientKeys = %+v", ck)
	}
	bad := t.TempDir() + "/bad.json"
	if err := os.WriteFile(bad, []byte(`{"public":"short","secret":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCurveKeyFile(bad); err == nil {
		t.Fatal("accepted malformed keys")
	}
}
