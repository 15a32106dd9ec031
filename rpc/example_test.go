package rpc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/distrl/distrl/rpc"
)

type scaleArgs struct {
	X      float64 `msgpack:"x"`
	Factor float64 `msgpack:"factor"`
}

func Example() {
	srv, err := rpc.NewServer(rpc.ServerOptions{}) // 127.0.0.1, random port
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	_ = srv.Mux().Handle("scale", rpc.Typed(func(_ context.Context, a scaleArgs) (float64, error) {
		return a.X * a.Factor, nil
	}))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	served := make(chan error)
	go func() { served <- srv.Serve(ctx) }()

	c, err := rpc.Dial(srv.Addr(), rpc.ClientOptions{})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	var y float64
	err = c.Request(ctx, "scale", scaleArgs{X: 1.5, Factor: 4}, &y)
	fmt.Println(y, err)

	err = c.Request(ctx, "rotate", nil, nil)
	fmt.Println(err)

	cancel()
	<-served
	// Output:
	// 6 <nil>
	// unknown_command: unknown command "rotate"
}
