package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
	zmq "github.com/pebbe/zmq4"
	"golang.org/x/sys/unix"
)

// bell is a worker type with a doorbell (worker.FdWaiter): a non-blocking
// pipe that the test rings, as the peer of a shared-memory channel does.
// Its Poll drains the pipe, and, if configured with pull_addr, a PULL
// socket of its own (worker.SocketOwner). While pending > 0, PrepareWait
// says input is there and each Poll takes one away.
type bell struct {
	rfd, wfd int
	pull     *zmq.Socket // the loop's only
	onePer   bool        // a Poll reads at most one message

	received atomic.Int64

	polls, rung, prepared, pending atomic.Int64
	polled                         chan time.Time // when each Poll ran, while there is room
}

var (
	_ worker.FdWaiter    = (*bell)(nil)
	_ worker.SocketOwner = (*bell)(nil)
)

func newBell() (*bell, error) {
	p := make([]int, 2)
	if err := unix.Pipe2(p, unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	return &bell{rfd: p[0], wfd: p[1], polled: make(chan time.Time, 64)}, nil
}

func (b *bell) Configure(_ context.Context, args rpc.Args) error {
	var cfg struct {
		PullAddr   string `msgpack:"pull_addr"`
		OnePerPoll bool   `msgpack:"one_per_poll"`
	}
	if err := args.Decode(&cfg); err != nil {
		return err
	}
	b.onePer = cfg.OnePerPoll
	if cfg.PullAddr == "" || b.pull != nil {
		return nil
	}
	pull, err := bindPull(cfg.PullAddr)
	b.pull = pull
	return err
}

// bindPull is a PULL socket bound at addr, for test workers that read
// input of their own.
func bindPull(addr string) (*zmq.Socket, error) {
	pull, err := zmq.NewSocket(zmq.PULL)
	if err != nil {
		return nil, err
	}
	if err := pull.Bind(addr); err != nil {
		pull.Close()
		return nil, err
	}
	return pull, nil
}

func (b *bell) Poll(context.Context) (worker.PollResult, error) {
	var buf [64]byte
	for {
		n, err := unix.Read(b.rfd, buf[:])
		if n > 0 {
			b.rung.Add(int64(n))
		}
		if err != nil || n <= 0 {
			break
		}
	}
	for b.pull != nil {
		if _, err := b.pull.Recv(zmq.DONTWAIT); err != nil {
			break
		}
		b.received.Add(1)
		if b.onePer {
			break
		}
	}
	select {
	case b.polled <- time.Now():
	default:
	}
	b.polls.Add(1)
	if b.pending.Load() > 0 { // last: the test reads polls once it is 0
		b.pending.Add(-1)
	}
	return worker.PollResult{}, nil
}

func (b *bell) WaitFds() []int { return []int{b.rfd} }

func (b *bell) PrepareWait() bool {
	b.prepared.Add(1)
	return b.pending.Load() == 0
}

func (b *bell) Sockets() []*zmq.Socket {
	if b.pull == nil {
		return nil
	}
	return []*zmq.Socket{b.pull}
}

func (b *bell) ring(t *testing.T) {
	t.Helper()
	if _, err := unix.Write(b.wfd, []byte{1}); err != nil {
		t.Fatal(err)
	}
}

func (b *bell) Stats() map[string]any { return map[string]any{} }

func (b *bell) Close() error {
	err := errors.Join(unix.Close(b.rfd), unix.Close(b.wfd))
	if b.pull != nil {
		err = errors.Join(err, b.pull.Close())
	}
	return err
}

// startBells runs n bell workers, alone (Run) if n is 1, else hosted in one
// loop (RunMany), and returns their names and implementations.
func startBells(t *testing.T, n int, idle time.Duration) (nameresolve.Repository, []string, []*bell) {
	t.Helper()
	return startBellsAs(t, n, worker.Options{IdleWait: idle}, func(b *bell) worker.Impl { return b })
}

// startBellsAs is startBells with the loop options of opts and each bell
// wrapped as the worker type by wrap.
func startBellsAs(t *testing.T, n int, opts worker.Options, wrap func(*bell) worker.Impl) (nameresolve.Repository, []string, []*bell) {
	t.Helper()
	var mu sync.Mutex
	bells := make([]*bell, n)
	reg := workertest.Registry(map[string]worker.Factory{"bell": func(info worker.Info) (worker.Impl, error) {
		b, err := newBell()
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		bells[info.Index] = b
		return wrap(b), nil
	}})
	repo := workertest.Repo(t)
	opts.Trial, opts.Registry, opts.Type, opts.Host, opts.Repo = testTrial, reg, "bell", "127.0.0.1", repo
	opts.Logger = workertest.Logger(t, slog.LevelWarn)
	var names []string
	if n == 1 {
		names = []string{workertest.StartChecked(t, opts).Name()}
	} else {
		_, names, _ = startHosted(t, opts, n)
	}
	mu.Lock()
	defer mu.Unlock()
	return repo, names, append([]*bell(nil), bells...)
}

// nextPoll waits for b's next Poll and returns when it ran.
func (b *bell) nextPoll(t *testing.T) time.Time {
	t.Helper()
	select {
	case at := <-b.polled:
		return at
	case <-time.After(5 * time.Second):
		t.Fatal("no poll within 5s")
		return time.Time{}
	}
}

// An idle RUNNING worker sleeps on its FdWaiter's descriptors: a byte
// written to the doorbell wakes it at once; before it runs it is not
// watched. PrepareWait saying input is there makes the loop poll the
// worker without sleeping.
//
// However long IdleWait is, a loop sleeps at most DefaultIdleWait (100 ms)
// and then polls every RUNNING worker, so the tests tell a wake-up from
// that sweep by its timing: the doorbell rings right after a sweep's poll,
// and must be answered well before the next sweep.
func TestFdWaiter(t *testing.T) {
	const sweep = worker.DefaultIdleWait
	for _, c := range []struct {
		name    string
		workers int
	}{{"Run", 1}, {"RunMany", 3}} {
		t.Run(c.name+"/doorbell wakes the idle worker", func(t *testing.T) {
			repo, names, bells := startBells(t, c.workers, 10*time.Second)
			b := bells[c.workers/2]
			startAll(t, repo, names, func() {
				if n := b.prepared.Load(); n != 0 {
					t.Errorf("PrepareWait called %d times before the worker runs", n)
				}
			})
			eventually.True(t, 5*time.Second, "the loop prepares to sleep", func() bool { return b.prepared.Load() > 0 })
			// A loaded machine can delay one wake-up past half a sweep, but
			// not every one of ten: without the doorbell every round takes
			// the rest of a sweep.
			const rounds = 10
			woken := 0
			for round := range rounds {
				for len(b.polled) > 0 {
					<-b.polled
				}
				b.nextPoll(t) // a sweep's, the doorbell not rung: the next sweep is 100 ms away
				rung := time.Now()
				b.ring(t)
				latency := b.nextPoll(t).Sub(rung)
				t.Logf("round %d: polled %v after the ring", round, latency)
				if latency < sweep/2 {
					woken++
				}
				if n := b.rung.Load(); n != int64(round+1) {
					t.Fatalf("round %d: %d bytes drained", round, n)
				}
			}
			if woken == 0 {
				t.Fatalf("no poll in %d rounds came within %v of the ring: the doorbell does not wake the loop", rounds, sweep/2)
			}
		})
		t.Run(c.name+"/PrepareWait false polls without sleeping", func(t *testing.T) {
			repo, names, bells := startBells(t, c.workers, 10*time.Second)
			b := bells[c.workers/2]
			const pending = 5
			b.pending.Store(pending)
			startAll(t, repo, names, nil)
			// The start polls once; each PrepareWait that finds one left
			// makes the loop poll again at once, where sleeping would take
			// a sweep (100 ms) per poll.
			first := b.nextPoll(t)
			last := first
			for range pending - 1 {
				last = b.nextPoll(t)
			}
			t.Logf("%d pending polled in %v", pending, last.Sub(first))
			// Sleeping would take a sweep per poll: 400 ms.
			if last.Sub(first) > 2*sweep {
				t.Fatalf("%d pending polled in %v: the loop slept", pending, last.Sub(first))
			}
			if n := b.prepared.Load(); n < pending-1 {
				t.Fatalf("PrepareWait called %d times for %d pending", n, pending)
			}
		})
	}
}

// ZMQ_FD is edge-triggered: once a socket's input was noticed, messages
// queued behind it do not make its descriptor readable again. A worker
// whose Poll reads one message at a time (and reports no work done) still
// gets all of them at once: the loop looks at the socket's events before
// it sleeps, not only at its descriptor.
func TestInputLeftUnreadIsNotSleptOn(t *testing.T) {
	const sweep = worker.DefaultIdleWait
	for _, c := range []struct {
		name    string
		workers int
	}{{"Run", 1}, {"RunMany", 3}} {
		t.Run(c.name, func(t *testing.T) {
			repo, names, bells := startBells(t, c.workers, 10*time.Second)
			i := c.workers / 2
			b := bells[i]
			panel := workertest.Panel(t, repo, testTrial)
			addr := "inproc://bell-unread-" + c.name
			push := pullFrom(t, panel, names[i], map[string]any{"pull_addr": addr, "one_per_poll": true})
			eventually.True(t, 5*time.Second, "the loop prepares to sleep", func() bool { return b.prepared.Load() > 0 })
			const n = 5
			sent := time.Now()
			for range n {
				if _, err := push.Send("work", 0); err != nil {
					t.Fatal(err)
				}
			}
			eventually.True(t, 5*time.Second, "all received", func() bool { return b.received.Load() == n })
			took := time.Since(sent)
			t.Logf("%d messages read one per poll in %v", n, took)
			// Sleeping on queued input would take a sweep per message: 400 ms.
			if took > 2*sweep {
				t.Fatalf("%d messages read one per poll in %v: the loop slept on queued input", n, took)
			}
		})
	}
}

// pullFrom configures worker name with config (whose pull_addr is where it
// pulls from), starts it, and returns a PUSH socket connected to its
// pull_addr, closed when the test ends.
func pullFrom(t *testing.T, panel *panel.ControlPanel, name string, config map[string]any) *zmq.Socket {
	t.Helper()
	ctx := ctxT(t)
	if err := panel.Request(ctx, name, "configure", config, nil); err != nil {
		t.Fatal(err)
	}
	if err := panel.Request(ctx, name, "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	push, err := zmq.NewSocket(zmq.PUSH)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { push.Close() })
	if err := push.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if err := push.Connect(config["pull_addr"].(string)); err != nil {
		t.Fatal(err)
	}
	return push
}

// An idle loop sleeps: sockets that signalled without input (connections,
// replies sent, messages read) and a doorbell that was drained do not make
// it turn again, so it turns about once per IdleWait.
func TestIdleLoopDoesNotSpin(t *testing.T) {
	for _, c := range []struct {
		name    string
		workers int
	}{{"Run", 1}, {"RunMany", 4}} {
		t.Run(c.name, func(t *testing.T) {
			repo, names, bells := startBells(t, c.workers, 100*time.Millisecond)
			panel := workertest.Panel(t, repo, testTrial)
			ctx := ctxT(t)
			if err := panel.Connect(ctx, names...); err != nil {
				t.Fatal(err)
			}
			var pushes []*zmq.Socket
			for i, name := range names {
				addr := "inproc://bell-spin-" + c.name + "-" + name // unique per subtest: a closed socket unbinds asynchronously
				push := pullFrom(t, panel, name, map[string]any{"pull_addr": addr})
				pushes = append(pushes, push)
				bells[i].ring(t)
			}
			// Traffic on every kind of item, then nothing.
			for i, push := range pushes {
				for range 10 {
					if _, err := push.Send("work", 0); err != nil {
						t.Fatal(err)
					}
				}
				bells[i].ring(t)
			}
			for _, r := range panel.GroupRequest(ctx, names, "ping", nil) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			eventually.True(t, 5*time.Second, "the doorbells drained", func() bool {
				for _, b := range bells {
					if b.rung.Load() != 2 {
						return false
					}
				}
				return true
			})
			loops := func() int64 {
				var st member.Status
				if err := panel.Request(ctx, names[0], "status", nil, &st); err != nil {
					t.Fatal(err)
				}
				return st.Loops
			}
			const idle = 300 * time.Millisecond
			before := loops()
			time.Sleep(idle)
			turns := loops() - before
			t.Logf("%d loop turns in %v idle", turns, idle)
			if turns >= 50 {
				t.Fatalf("the idle loop turned %d times in %v with IdleWait 100ms: it spins", turns, idle)
			}
		})
	}
}

// startAll configures and starts the workers; between the two, before is
// called (if not nil).
func startAll(t *testing.T, repo nameresolve.Repository, names []string, before func()) {
	t.Helper()
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	if err := panel.Connect(ctx, names...); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"configure", "start"} {
		if cmd == "start" && before != nil {
			before()
		}
		for _, r := range panel.GroupRequest(ctx, names, cmd, nil) {
			if r.Err != nil {
				t.Fatalf("%s %s: %v", cmd, r.Worker, r.Err)
			}
		}
	}
}
