package rpc

import (
	"context"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
)

func TestWaitRequestWakesOnWatchedSocket(t *testing.T) {
	s := newTestServer(t, ServerOptions{})
	pull, err := zmq.NewSocket(zmq.PULL)
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	pull.SetLinger(0)
	if err := pull.Bind("inproc://watched"); err != nil {
		t.Fatal(err)
	}
	push, err := zmq.NewSocket(zmq.PUSH)
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	push.SetLinger(0)
	if err := push.Connect("inproc://watched"); err != nil {
		t.Fatal(err)
	}
	if err := s.WatchSocket(pull); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := push.Send("work", 0); err != nil {
		t.Fatal(err)
	}
	// A wait far longer than the test's budget: only the watched socket can end it.
	ready, err := s.WaitRequest(ctx, time.Hour)
	if err != nil || !ready {
		t.Fatalf("WaitRequest = %v, %v; want woken by the watched socket", ready, err)
	}
	if msg, err := pull.Recv(0); err != nil || msg != "work" {
		t.Fatalf("recv %q %v", msg, err)
	}
	if err := s.UnwatchSocket(pull); err != nil {
		t.Fatal(err)
	}
	if _, err := push.Send("more", 0); err != nil {
		t.Fatal(err)
	}
	ready, err = s.WaitRequest(ctx, 20*time.Millisecond)
	if err != nil || ready {
		t.Fatalf("after Unwatch: WaitRequest = %v, %v; want a plain timeout", ready, err)
	}
}
