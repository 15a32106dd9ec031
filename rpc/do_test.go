package rpc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestDo(t *testing.T) {
	var calls []*Call
	for i := range 3 {
		s := startServer(t, ServerOptions{})
		calls = append(calls, &Call{
			Client:  dial(t, s.Addr(), ClientOptions{}),
			Command: "add",
			Kwargs:  addArgs{A: i, B: 10},
			Reply:   new(addReply),
		})
	}
	live := calls[0].Client
	dead := &Call{Client: dial(t, loopback(freePort(t)), ClientOptions{}), Command: "ping"}
	unknown := &Call{Client: live, Command: "nope"}
	badKwargs := &Call{Client: live, Command: "add", Kwargs: 5}
	noClient := &Call{Command: "ping"}
	all := append(slices.Clone(calls), dead, unknown, badKwargs, noClient, nil)

	start := time.Now()
	Do(timeout(t, 300*time.Millisecond), all)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Do took %v under a 300ms deadline", d)
	}
	for i, c := range calls {
		if r := c.Reply.(*addReply); c.Err != nil || r.Sum != i+10 {
			t.Errorf("call %d = %+v, %v", i, r, c.Err)
		}
	}
	if !errors.Is(dead.Err, context.DeadlineExceeded) {
		t.Errorf("dead call Err = %v, want DeadlineExceeded", dead.Err)
	}
	if !errors.Is(unknown.Err, ErrUnknownCommand) {
		t.Errorf("unknown call Err = %v, want unknown_command", unknown.Err)
	}
	if badKwargs.Err == nil {
		t.Error("call with non-map kwargs succeeded")
	}
	if !errors.Is(noClient.Err, errNoClient) {
		t.Errorf("call without client Err = %v", noClient.Err)
	}

	// The clients are usable afterwards, the timed-out one included.
	if err := live.Request(timeout(t, 5*time.Second), "ping", nil, nil); err != nil {
		t.Errorf("Request after Do = %v", err)
	}
}

func TestDoSameClient(t *testing.T) {
	s := startServer(t, ServerOptions{})
	var mu sync.Mutex
	var order []int
	err := s.Mux().Handle("record", Typed(func(_ context.Context, a struct {
		N int `msgpack:"n"`
	}) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, a.N)
		return a.N, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.Addr(), ClientOptions{})

	const n = 10
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = &Call{Client: c, Command: "record", Kwargs: map[string]int{"n": i}, Reply: new(int)}
	}
	Do(timeout(t, 5*time.Second), calls)
	for i, call := range calls {
		if got := *call.Reply.(*int); call.Err != nil || got != i {
			t.Errorf("call %d = %d, %v", i, got, call.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(order, want) {
		t.Errorf("handled in order %v, want %v", order, want)
	}
}

// TestDoConcurrent runs overlapping Do batches and Requests at once; the
// consistent lock order must keep them from deadlocking.
func TestDoConcurrent(t *testing.T) {
	var clients []*Client
	for range 3 {
		s := startServer(t, ServerOptions{})
		clients = append(clients, dial(t, s.Addr(), ClientOptions{}))
	}
	ctx := timeout(t, 10*time.Second)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				var calls []*Call
				for i := range clients {
					// Each goroutine lists the clients in a different order.
					c := clients[(i+g)%len(clients)]
					calls = append(calls, &Call{Client: c, Command: "ping"})
				}
				Do(ctx, calls)
				for _, call := range calls {
					if call.Err != nil {
						t.Errorf("Do: %v", call.Err)
						return
					}
				}
				if err := clients[g%len(clients)].Request(ctx, "ping", nil, nil); err != nil {
					t.Errorf("Request: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
