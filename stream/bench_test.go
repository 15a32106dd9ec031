package stream_test

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

var quiet = slog.New(slog.DiscardHandler)

// reportMBps reports bytes moved per second of the timed part.
func reportMBps(b *testing.B, bytes int64, start time.Time) {
	b.ReportMetric(float64(bytes)/time.Since(start).Seconds()/1e6, "MB/s")
}

// BenchmarkSampleStream64KiB measures SampleProducer -> SampleConsumer
// throughput over TCP loopback with ~64 KiB batches (800 steps of 16
// floats plus the per-step arrays), encoding, decoding and validation
// included. The consumer runs on its own goroutine, as in a trainer.
func BenchmarkSampleStream64KiB(b *testing.B) {
	repo := nameresolve.NewMemory()
	defer repo.Close()
	ctx := ctxT(b)
	cons, err := stream.NewSampleConsumer(ctx, stream.SampleConsumerOptions{Repo: repo, Trial: testTrial, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	prod, err := stream.NewSampleProducer(ctx, stream.SampleProducerOptions{Repo: repo, Trial: testTrial, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	batch := makeBatch(b, "actor/0", 0, 800, 16)
	enc, err := msgpack.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	room := zmq.NewPoller()
	room.Add(prod.Socket(), zmq.POLLOUT)
	post := func() {
		for {
			err := prod.Post(batch)
			if err == nil {
				return
			}
			if !errors.Is(err, stream.ErrBackpressure) {
				b.Fatal(err)
			}
			// Wait until a consumer has room, as a back-pressured actor does.
			if _, err := room.Poll(10 * time.Millisecond); err != nil {
				b.Fatal(err)
			}
		}
	}
	post() // connect and warm up
	// The consumer moves to its goroutine only after this handover.
	done := make(chan error, 1)
	want := make(chan int, 1)
	go func() {
		defer cons.Close()
		p := zmq.NewPoller()
		p.Add(cons.Socket(), zmq.POLLIN)
		got, target := 0, -1
		for target < 0 || got < target {
			select {
			case target = <-want:
			default:
			}
			bs, err := cons.Poll(64)
			if err != nil {
				done <- err
				return
			}
			got += len(bs)
			if len(bs) == 0 {
				p.Poll(10 * time.Millisecond)
			}
		}
		if m := cons.Stats().Malformed; m != 0 {
			done <- fmt.Errorf("%d malformed", m)
			return
		}
		done <- nil
	}()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		post()
	}
	want <- b.N + 1
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportMBps(b, int64(len(enc))*int64(b.N), start)
}

// BenchmarkRawPushPull64KiB is the floor under BenchmarkSampleStream64KiB:
// bare zmq4 PUSH -> PULL over TCP loopback, 64 KiB messages, no encoding.
func BenchmarkRawPushPull64KiB(b *testing.B) {
	pull, err := zmq.NewSocket(zmq.PULL)
	if err != nil {
		b.Fatal(err)
	}
	if err := pull.Bind("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	ep, _ := pull.GetLastEndpoint()
	push, err := zmq.NewSocket(zmq.PUSH)
	if err != nil {
		b.Fatal(err)
	}
	defer push.Close()
	push.SetLinger(0)
	if err := push.Connect(ep); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 64<<10)
	n := b.N
	done := make(chan error, 1)
	go func() {
		defer pull.Close()
		for range n {
			if _, err := pull.RecvBytes(0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ResetTimer()
	start := time.Now()
	for range n {
		if _, err := push.SendBytes(msg, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportMBps(b, int64(len(msg))*int64(n), start)
}

// BenchmarkInferenceRoundTrip measures one actor's request cycle against
// one policy worker in the same goroutine: Post rows, Flush, server Poll
// and Respond (a trivial policy), client Poll until every row is Ready,
// Consume. It is latency-bound: over ZMQ, two TCP loopback hops per
// iteration; over shared memory (another process on the node), two ring
// writes; in process (the default here), two hand-overs without encoding.
func BenchmarkInferenceRoundTrip(b *testing.B) {
	for _, tc := range []struct{ transport, shm, proc string }{{"zmq", "0", ""}, {"shm", "", "0"}, {"inprocess", "", ""}} {
		for _, rows := range []int{1, 16, 128} {
			b.Run(fmt.Sprintf("%s/rows=%d", tc.transport, rows), func(b *testing.B) {
				b.Setenv(shm.Env, tc.shm)
				b.Setenv(stream.InProcessEnv, tc.proc)
				benchInferenceRoundTrip(b, rows)
			})
		}
	}
}

func benchInferenceRoundTrip(b *testing.B, rows int) {
	repo := nameresolve.NewMemory()
	defer repo.Close()
	ctx := ctxT(b)
	srv, err := stream.NewInferenceServer(ctx, stream.InferenceServerOptions{Repo: repo, Trial: testTrial, ObsDim: obsDim, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := stream.NewRemoteInferenceClient(ctx, stream.RemoteInferenceOptions{Repo: repo, Trial: testTrial, ObsDim: obsDim, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sp, cp := zmq.NewPoller(), zmq.NewPoller()
	sp.Add(srv.Socket(), zmq.POLLIN)
	cp.Add(c.Socket(), zmq.POLLIN)
	var (
		batch stream.InferenceBatch
		out   api.Inference
		ids   = make([]stream.ReqID, rows)
		obs   = obsFor(1)
	)
	round := func() {
		for i := range ids {
			if ids[i], err = c.Post(obs); err != nil {
				b.Fatal(err)
			}
		}
		for c.Stats().Messages == 0 { // first round: wait for the connection
			if err := c.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			if c.Stats().Messages == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		if err := c.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		// Each side reads first and waits on ZMQ only when nothing
		// was there: a shared-memory message is there at once.
		for got := 0; got < rows; {
			n, err := srv.Poll(1024, &batch)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				if _, err := sp.Poll(time.Second); err != nil {
					b.Fatal(err)
				}
				continue
			}
			testPolicy(batch.Obs, &out)
			if err := srv.Respond(&batch, &out); err != nil {
				b.Fatal(err)
			}
			got += n
		}
		for {
			if err := c.Poll(); err != nil {
				b.Fatal(err)
			}
			if c.Ready(ids[rows-1]) {
				break
			}
			if _, err := cp.Poll(time.Second); err != nil {
				b.Fatal(err)
			}
		}
		for _, id := range ids {
			if _, err := c.Consume(id); err != nil {
				b.Fatal(err)
			}
		}
	}
	round()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		round()
	}
	b.StopTimer()
	b.ReportMetric(float64(rows*b.N)/time.Since(start).Seconds(), "rows/s")

}
