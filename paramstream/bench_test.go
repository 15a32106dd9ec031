package paramstream_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/paramstream"
	zmq "github.com/pebbe/zmq4"
)

// benchSizes are a CartPole actor-critic with [64, 64] hidden layers
// (4,610 parameters) and a 1M-parameter vector (4 MiB).
var benchSizes = []struct {
	name string
	n    int
}{
	{"cartpole-4610", 4610},
	{"1M", 1 << 20},
}

// BenchmarkPublishFetch is one new version end to end: Publish (copy and
// encode, notify, write the record) and one subscriber's network fetch
// (request, reply over loopback TCP, decode). MB/s is parameter bytes.
//
// The benchmark's goroutine owns the publisher, as a trainer's loop
// would, and answers the fetch; another goroutine owns the subscriber.
func BenchmarkPublishFetch(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			repo := workertest.Repo(b)
			pub, err := paramstream.NewPublisher(ctxT(b), paramstream.PublisherOptions{
				Repo: repo, Trial: testTrial, Logger: quietLogger(),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			s := newSubscriber(b, repo, func(o *paramstream.SubscriberOptions) { o.NoCache, o.Logger = true, quietLogger() })
			poller := zmq.NewPoller()
			poller.Add(pub.Socket(), zmq.POLLIN)
			ctx := ctxT(b)
			fetch, fetched := make(chan int64), make(chan error)
			go func() {
				for v := range fetch {
					p, err := s.Fetch(ctx)
					if err == nil && p.Version != v {
						err = fmt.Errorf("fetched version %d, want %d", p.Version, v)
					}
					fetched <- err
				}
			}()
			defer close(fetch)
			data := paramsFor(1, sz.n)
			b.SetBytes(int64(4 * sz.n))
			b.ReportAllocs()
			v := int64(0)
			for b.Loop() {
				v++
				if err := pub.Publish(ctx, v, data); err != nil {
					b.Fatal(err)
				}
				fetch <- v
				for served := pub.Stats().Served; pub.Stats().Served == served; {
					if _, err := poller.Poll(time.Second); err != nil {
						b.Fatal(err)
					}
					if _, err := pub.Poll(16); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-fetched; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCacheRead is what every subscriber of a node but one pays for
// a new version: finding the newest file in the node cache and reading
// and checking it.
func BenchmarkCacheRead(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			repo := workertest.Repo(b)
			pub := startPublisher(b, repo, func(o *paramstream.PublisherOptions) { o.Logger = quietLogger() })
			s := newSubscriber(b, repo, func(o *paramstream.SubscriberOptions) { o.Logger = quietLogger() })
			pub.publish(b, 1, paramsFor(1, sz.n))
			ctx := ctxT(b)
			if _, err := s.Fetch(ctx); err != nil { // fills the cache
				b.Fatal(err)
			}
			b.SetBytes(int64(4 * sz.n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Fetch(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if st := s.Stats(); st.NetworkFetches != 1 {
				b.Fatalf("%d network fetches, want 1: the loop did not read the cache", st.NetworkFetches)
			}
		})
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// BenchmarkPollNothingNew is what following parameters adds to every
// batch a policy worker serves: a Poll that finds nothing new.
func BenchmarkPollNothingNew(b *testing.B) {
	repo := workertest.Repo(b)
	pub := startPublisher(b, repo, func(o *paramstream.PublisherOptions) { o.Logger = quietLogger() })
	s := newSubscriber(b, repo, func(o *paramstream.SubscriberOptions) { o.Logger = quietLogger() })
	pub.publish(b, 1, paramsFor(1, 16))
	ctx := ctxT(b)
	if _, err := s.Fetch(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p, err := s.Poll(ctx); p != nil || err != nil {
			b.Fatalf("Poll = %v, %v", p, err)
		}
	}
}
