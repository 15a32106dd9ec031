package paramstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/paramstream"
	zmq "github.com/pebbe/zmq4"
)

var testTrial = names.NewTrial("paramtest", "t1")

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		// A child of TestSharedCacheAcrossProcesses: one subscriber
		// process, not a test run.
		os.Exit(helperMain())
	}
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

// testLogger sends logs to the test's log, shown on failure or with -v.
func testLogger(t testing.TB) *slog.Logger { return workertest.Logger(t, slog.LevelDebug) }

func ctxT(t testing.TB) context.Context { return workertest.Ctx(t, 10*time.Second) }

// paramsFor is the parameter vector tests publish as version v: every
// value depends on v and the index, so a wrong version or a shifted copy
// shows.
func paramsFor(v int64, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(v)*1000 + float32(i%4096)*0.25
	}
	return out
}

// ---- publisher on a goroutine of its own, as a trainer loop would run it ----

type pubLoop struct {
	pub  *paramstream.Publisher
	cmds chan func()
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error // a Poll failure; read after done
}

func startPublisher(t testing.TB, repo nameresolve.Repository, mod func(*paramstream.PublisherOptions)) *pubLoop {
	t.Helper()
	opts := paramstream.PublisherOptions{Repo: repo, Trial: testTrial, TTL: time.Second, Logger: testLogger(t)}
	if mod != nil {
		mod(&opts)
	}
	pub, err := paramstream.NewPublisher(ctxT(t), opts)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	l := &pubLoop{pub: pub, cmds: make(chan func()), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	t.Cleanup(func() {
		l.close()
		if l.err != nil {
			t.Errorf("publisher loop: %v", l.err)
		}
	})
	return l
}

func (l *pubLoop) run() {
	defer close(l.done)
	poller := zmq.NewPoller()
	poller.Add(l.pub.Socket(), zmq.POLLIN)
	for {
		select {
		case f := <-l.cmds:
			f()
			continue
		case <-l.stop:
			if err := l.pub.Close(); err != nil {
				l.err = err
			}
			return
		default:
		}
		if _, err := l.pub.Poll(64); err != nil {
			l.err = err
			l.pub.Close()
			return
		}
		if _, err := poller.Poll(2 * time.Millisecond); err != nil {
			l.err = err
			l.pub.Close()
			return
		}
	}
}

// do runs f on the publisher's goroutine and waits for it.
func (l *pubLoop) do(t testing.TB, f func(*paramstream.Publisher)) {
	t.Helper()
	ran := make(chan struct{})
	select {
	case l.cmds <- func() { f(l.pub); close(ran) }:
		<-ran
	case <-l.done:
		t.Fatalf("publisher loop ended: %v", l.err)
	}
}

func (l *pubLoop) publish(t testing.TB, v int64, data []float32) {
	t.Helper()
	var err error
	l.do(t, func(p *paramstream.Publisher) { err = p.Publish(ctxT(t), v, data) })
	if err != nil {
		t.Fatalf("Publish(%d): %v", v, err)
	}
}

func (l *pubLoop) stats(t testing.TB) paramstream.PublisherStats {
	t.Helper()
	var st paramstream.PublisherStats
	l.do(t, func(p *paramstream.Publisher) { st = p.Stats() })
	return st
}

// close closes the publisher (removing its record) and ends the loop.
func (l *pubLoop) close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// ---- subscribers ----

func newSubscriber(t testing.TB, repo nameresolve.Repository, mod func(*paramstream.SubscriberOptions)) *paramstream.Subscriber {
	t.Helper()
	opts := paramstream.SubscriberOptions{
		Repo: repo, Trial: testTrial, CacheDir: t.TempDir(), FetchTimeout: 5 * time.Second, Logger: testLogger(t),
	}
	if mod != nil {
		mod(&opts)
	}
	s, err := paramstream.NewSubscriber(ctxT(t), opts)
	if err != nil {
		t.Fatalf("NewSubscriber: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// follower polls a subscriber and checks what it returns.
type follower struct {
	s      *paramstream.Subscriber
	n      int // length of the published vectors
	got    []int64
	poller *zmq.Poller
}

func newFollower(s *paramstream.Subscriber, n int) *follower {
	p := zmq.NewPoller()
	for _, sock := range s.Sockets() {
		p.Add(sock, zmq.POLLIN)
	}
	return &follower{s: s, n: n, poller: p}
}

// until polls until a version >= want has been returned. Every version
// returned must be newer than the one before and hold paramsFor's data.
// It returns an error rather than failing, so that it can run on
// goroutines other than the test's.
func (f *follower) until(ctx context.Context, want int64) error {
	for {
		p, err := f.s.Poll(ctx)
		if err != nil {
			return fmt.Errorf("Poll: %w", err)
		}
		if p != nil {
			if len(f.got) > 0 && p.Version <= f.got[len(f.got)-1] {
				return fmt.Errorf("version %d after %v: not monotonic", p.Version, f.got)
			}
			f.got = append(f.got, p.Version)
			if !slices.Equal(p.Data, paramsFor(p.Version, f.n)) {
				return fmt.Errorf("version %d: data differs from what was published", p.Version)
			}
			if p.Version >= want {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no version >= %d (got %v, warning %q): %w", want, f.got, f.s.Warning(), ctx.Err())
		}
		if _, err := f.poller.Poll(5 * time.Millisecond); err != nil {
			return err
		}
	}
}

func (f *follower) mustUntil(t testing.TB, want int64) {
	t.Helper()
	if err := f.until(ctxT(t), want); err != nil {
		t.Fatal(err)
	}
}
