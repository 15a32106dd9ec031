package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// routedServer serves workers "w/0".."w/n-1" on one socket, each answering
// "who" with its own name; requests that name none are refused.
func routedServer(t *testing.T, n int) (*Server, []*Mux) {
	t.Helper()
	s := newTestServer(t, ServerOptions{NoDefault: true})
	muxes := make([]*Mux, n)
	for i := range muxes {
		name := fmt.Sprintf("w/%d", i)
		muxes[i] = NewMux()
		if err := muxes[i].Handle("who", func(context.Context, Args) (any, error) { return name, nil }); err != nil {
			t.Fatal(err)
		}
		s.Route(name, muxes[i])
	}
	serve(t, s)
	return s, muxes
}

func TestServerRoutes(t *testing.T) {
	s, muxes := routedServer(t, 3)
	c := dial(t, s.Addr(), ClientOptions{})
	ctx := timeout(t, 5e9)
	tests := []struct {
		target  string
		command string
		want    string
		wantErr error
	}{
		{"w/0", "who", "w/0", nil},
		{"w/2", "who", "w/2", nil},
		{"w/3", "who", "", ErrUnknownWorker},
		{"", "who", "", ErrUnknownWorker}, // NoDefault: the server cannot guess
		{"w/1", "ping", "", ErrUnknownCommand},
	}
	for _, tt := range tests {
		t.Run(tt.target+" "+tt.command, func(t *testing.T) {
			var got string
			err := c.RequestTo(ctx, tt.target, tt.command, nil, &got)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("RequestTo(%q, %q) = %q, %v; want %q, %v", tt.target, tt.command, got, err, tt.want, tt.wantErr)
			}
		})
	}
	if got := muxes[1].Served(); got != 1 {
		t.Errorf("w/1 served %d requests, want 1 (the unknown command)", got)
	}
	s.Unroute("w/0")
	if err := c.RequestTo(ctx, "w/0", "who", nil, nil); !errors.Is(err, ErrUnknownWorker) {
		t.Errorf("request to an unrouted worker = %v, want unknown_worker", err)
	}
}

// TestServerRouteDefault: without NoDefault, requests that name no worker
// go to the server's own Mux, and requests that name one to its route.
func TestServerRouteDefault(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	m := NewMux()
	if err := m.Handle("ping", func(context.Context, Args) (any, error) { return "routed", nil }); err != nil {
		t.Fatal(err)
	}
	s.Route("w/0", m)
	serve(t, s)
	c := dial(t, s.Addr(), ClientOptions{})
	ctx := timeout(t, 5e9)
	for target, want := range map[string]string{"": "pong", "w/0": "routed"} {
		var got string
		if err := c.RequestTo(ctx, target, "ping", nil, &got); err != nil || got != want {
			t.Errorf("RequestTo(%q) = %q, %v; want %q", target, got, err, want)
		}
	}
}

// TestDoManyOnOneClient: many more calls to one server than fit its
// queues (a REP server drops replies it cannot queue) all get their
// replies, each from the worker it named.
func TestDoManyOnOneClient(t *testing.T) {
	const workers, calls = 16, 5000
	s, _ := routedServer(t, workers)
	c := dial(t, s.Addr(), ClientOptions{})
	all := make([]*Call, calls)
	for i := range all {
		all[i] = &Call{Client: c, Target: fmt.Sprintf("w/%d", i%workers), Command: "who", Reply: new(string)}
	}
	Do(timeout(t, 60e9), all)
	for i, call := range all {
		if got := *call.Reply.(*string); call.Err != nil || got != call.Target {
			t.Fatalf("call %d to %s = %q, %v", i, call.Target, got, call.Err)
		}
	}
}
