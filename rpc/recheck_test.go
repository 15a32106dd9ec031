package rpc

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRequestRecheck: a reply later than Recheck.After asks Still once;
// true waits for the reply, false abandons the request, which is then
// never delivered (a server that comes up at the address later does not
// run it).
func TestRequestRecheck(t *testing.T) {
	t.Run("still the server: the slow reply is taken", func(t *testing.T) {
		s := startServer(t, ServerOptions{})
		c := dial(t, s.Addr(), ClientOptions{})
		var asked atomic.Int32
		var ms int
		err := c.RequestToRecheck(timeout(t, 5*time.Second), "", "sleep", sleepArgs{Ms: 150}, &ms,
			Recheck{After: 20 * time.Millisecond, Still: func() bool { asked.Add(1); return true }})
		if err != nil || ms != 150 {
			t.Fatalf("RequestToRecheck = %d, %v; want 150, nil", ms, err)
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("Still asked %d times, want 1", n)
		}
	})
	t.Run("a fast reply asks nothing", func(t *testing.T) {
		s := startServer(t, ServerOptions{})
		c := dial(t, s.Addr(), ClientOptions{})
		err := c.RequestToRecheck(timeout(t, 5*time.Second), "", "ping", nil, nil,
			Recheck{After: time.Minute, Still: func() bool { t.Error("Still asked"); return true }})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("moved: abandoned, never delivered", func(t *testing.T) {
		port := freePort(t)
		c := dial(t, loopback(port), ClientOptions{})
		err := c.RequestToRecheck(timeout(t, 5*time.Second), "", "count", nil, nil,
			Recheck{After: 20 * time.Millisecond, Still: func() bool { return false }})
		if !errors.Is(err, ErrAbandoned) {
			t.Fatalf("RequestToRecheck to nobody = %v, want ErrAbandoned", err)
		}
		startCountingServer(t, port)
		var got int32
		if err := c.Request(timeout(t, 5*time.Second), "count", nil, &got); err != nil || got != 1 {
			t.Fatalf("count = %d, %v; want 1: the abandoned request was delivered", got, err)
		}
	})
}
