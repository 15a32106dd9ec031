package main

import (
	"testing"

	zmq "github.com/pebbe/zmq4"
)

// More sockets than libzmq's default cap of 1023 can be open at once, as a
// controller of a thousand workers needs.
func TestRaiseSocketLimit(t *testing.T) {
	if err := raiseSocketLimit(); err != nil {
		t.Fatal(err)
	}
	const n = 1100
	socks := make([]*zmq.Socket, 0, n)
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	for i := range n {
		s, err := zmq.NewSocket(zmq.DEALER)
		if err != nil {
			t.Fatalf("socket %d: %v", i+1, err)
		}
		socks = append(socks, s)
	}
}
