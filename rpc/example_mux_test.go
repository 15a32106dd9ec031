package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distrl/distrl/rpc"
)

// A Mux is filled apart from the transport: the code that owns the
// commands builds it, and the server that owns the socket dispatches to it.
// Do then sends one request to each of several clients and waits on one
// poller.
func ExampleMux() {
	mux := rpc.NewMux()
	if err := mux.HandleAll(map[string]rpc.Handler{
		"ping": func(context.Context, rpc.Args) (any, error) { return "pong", nil },
		"add": rpc.Typed(func(_ context.Context, a struct {
			A int `msgpack:"a"`
			B int `msgpack:"b"`
		}) (int, error) {
			return a.A + a.B, nil
		}),
	}); err != nil {
		panic(err)
	}
	fmt.Println(mux.Commands())

	srv, err := rpc.NewServer(rpc.ServerOptions{Mux: mux})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	served := make(chan error)
	go func() { served <- srv.Serve(ctx) }()

	c, err := rpc.Dial(srv.Addr(), rpc.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var pong string
	var sum int
	calls := []*rpc.Call{
		{Client: c, Command: "ping", Reply: &pong},
		{Client: c, Command: "add", Kwargs: map[string]int{"a": 2, "b": 3}, Reply: &sum},
		// Args decode strictly: a key the handler does not take is an error.
		{Client: c, Command: "add", Kwargs: map[string]int{"a": 2, "c": 3}},
	}
	rpc.Do(ctx, calls)
	fmt.Println(pong, calls[0].Err)
	fmt.Println(sum, calls[1].Err)
	fmt.Println(errors.Is(calls[2].Err, rpc.ErrBadArguments))

	cancel()
	<-served
	// Output:
	// [add ping]
	// pong <nil>
	// 5 <nil>
	// true
}
