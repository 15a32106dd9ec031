package rpc

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	zmq "github.com/pebbe/zmq4"
)

func benchSocket(b *testing.B, typ zmq.Type) *zmq.Socket {
	b.Helper()
	s, err := zmq.NewSocket(typ)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SetLinger(0); err != nil {
		b.Fatal(err)
	}
	return s
}

// rawServer runs fn on a socket of typ bound to loopback in its own
// goroutine until cleanup, and returns the bound endpoint. fn is called once
// per received message; a receive timeout lets the loop notice cleanup.
func rawServer(b *testing.B, typ zmq.Type, fn func(s *zmq.Socket, msg [][]byte)) string {
	b.Helper()
	s := benchSocket(b, typ)
	if err := s.SetRcvtimeo(20 * time.Millisecond); err != nil {
		b.Fatal(err)
	}
	if err := s.Bind("tcp://127.0.0.1:*"); err != nil {
		b.Fatal(err)
	}
	ep, err := s.GetLastEndpoint()
	if err != nil {
		b.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer s.Close()
		for !stop.Load() {
			msg, err := s.RecvMessageBytes(0)
			if err != nil {
				continue
			}
			fn(s, msg)
		}
	}()
	b.Cleanup(func() {
		stop.Store(true)
		wg.Wait()
	})
	return ep
}

func pingPayloads(b *testing.B) (req, rep []byte) {
	return mustMarshal(b, []any{"ping", map[string]any{}}), mustMarshal(b, map[string]any{"ok": "pong"})
}

func BenchmarkRawREQREP(b *testing.B) {
	req, rep := pingPayloads(b)
	ep := rawServer(b, zmq.REP, func(s *zmq.Socket, _ [][]byte) { _, _ = s.SendBytes(rep, 0) })
	c := benchSocket(b, zmq.REQ)
	defer c.Close()
	if err := c.Connect(ep); err != nil {
		b.Fatal(err)
	}
	var lat benchutil.Latencies
	b.ResetTimer()
	lat.Start(b.N)
	for range b.N {
		lat.Time(func() {
			if _, err := c.SendBytes(req, 0); err != nil {
				b.Fatal(err)
			}
			if _, err := c.RecvBytes(0); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.StopTimer()
	lat.ReportRate(b, "us", b.N, "req/s")
}

func BenchmarkRawDealerRouterPipelined(b *testing.B) {
	const inFlight = 64
	req, rep := pingPayloads(b)
	ep := rawServer(b, zmq.ROUTER, func(s *zmq.Socket, msg [][]byte) {
		// [peer, id, "", payload] -> [peer, id, "", reply]
		if len(msg) == 4 {
			_, _ = s.SendMessage(msg[0], msg[1], "", rep)
		}
	})
	c := benchSocket(b, zmq.DEALER)
	defer c.Close()
	if err := c.Connect(ep); err != nil {
		b.Fatal(err)
	}
	sent := make([]time.Time, b.N)
	var lat benchutil.Latencies
	var id [8]byte
	send := func(i int) {
		binary.BigEndian.PutUint64(id[:], uint64(i))
		sent[i] = time.Now()
		if _, err := c.SendMessage(id[:], "", req); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	lat.Start(b.N)
	next := 0
	for ; next < min(inFlight, b.N); next++ {
		send(next)
	}
	for range b.N {
		msg, err := c.RecvMessageBytes(0)
		if err != nil {
			b.Fatal(err)
		}
		lat.Record(time.Since(sent[binary.BigEndian.Uint64(msg[0])]))
		if next < b.N {
			send(next)
			next++
		}
	}
	b.StopTimer()
	lat.ReportRate(b, "us", b.N, "req/s")
}

func BenchmarkClientRequest(b *testing.B) {
	s := startServer(b, ServerOptions{})
	c := dial(b, s.Addr(), ClientOptions{})
	ctx := context.Background()
	var lat benchutil.Latencies
	b.ReportAllocs()
	b.ResetTimer()
	lat.Start(b.N)
	for range b.N {
		lat.Time(func() {
			if err := c.Request(ctx, "ping", nil, nil); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.StopTimer()
	lat.ReportRate(b, "us", b.N, "req/s")
}

// BenchmarkDo64 measures one Do over 64 servers, each with its own Serve
// goroutine; p50/p99 are per Do, req/s counts individual calls.
func BenchmarkDo64(b *testing.B) {
	const n = 64
	calls := make([]*Call, n)
	for i := range calls {
		s := startServer(b, ServerOptions{})
		calls[i] = &Call{Client: dial(b, s.Addr(), ClientOptions{}), Command: "ping"}
	}
	ctx := context.Background()
	Do(ctx, calls) // connect everything before timing
	var lat benchutil.Latencies
	b.ReportAllocs()
	b.ResetTimer()
	lat.Start(b.N)
	for range b.N {
		lat.Time(func() { Do(ctx, calls) })
		for _, c := range calls {
			if c.Err != nil {
				b.Fatal(c.Err)
			}
		}
	}
	b.StopTimer()
	lat.ReportRate(b, "us", b.N*n, "req/s")
}
