package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
)

// newParallel bounds the workers NewHosted creates at once: each waits for
// the name server to register it.
const newParallel = 32

// host is what the workers made together by one NewHosted share: one rpc
// server (one socket, one address: a request names its worker) and one
// loop, whose heartbeat is the loop record. A thousand workers in one
// process cost one socket to poll, one connection per control panel and
// one heartbeat write per Options.Heartbeat.
type host struct {
	srv    *rpc.Server
	loopID string // the loop record's name: the first worker's
	loop   *recordWriter
	every  time.Duration
	// maxRequests caps the requests answered per turn, so that polls get
	// their turn too: Options.RequestsPerLoop for each worker.
	maxRequests int
	size        int

	// metricsLoop is the loop's heartbeat in the workers' metrics.
	metricsLoop *telemetry.Loop

	// turns and beat are the loop's: only the goroutine running the
	// workers touches them.
	turns int64
	beat  time.Time
	// unread: the server may hold requests (the last read was cut at
	// maxRequests, or the wait saw input); readAt: when it was last read
	// or known to be empty.
	unread bool
	readAt time.Time

	mu    sync.Mutex
	users int // workers not shut down yet; the last one closes srv
}

// turn counts a turn of the loop and, every Options.Heartbeat, publishes
// it: a loop stuck in a poll or a handler stops doing so.
func (h *host) turn(now time.Time) {
	h.turns++
	h.metricsLoop.Turned(now)
	if now.Sub(h.beat) < h.every {
		return
	}
	h.beat = now
	hostname, _ := os.Hostname()
	h.loop.publish(member.LoopRecord{
		Loops: h.turns, HeartbeatMs: now.UnixMilli(), Workers: h.size, Host: hostname, PID: os.Getpid(),
	}.Record())
}

// open reports whether a worker of h has not shut down yet.
func (h *host) open() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.users > 0
}

// release is called by each worker as it shuts down; the last one closes
// the server and removes the loop record.
func (h *host) release() {
	h.mu.Lock()
	h.users--
	last := h.users == 0
	h.mu.Unlock()
	if !last {
		return
	}
	h.loop.remove()
	_ = h.srv.Close()
}

// NewHosted creates count workers of opts.Type, TYPE/INDEX to
// TYPE/INDEX+count-1, that one process runs with one loop (RunMany): they
// share one server, so their address records hold the same host:port, and
// a request names the worker it is for. Each keeps its own commands,
// status record and lifecycle. On an error the workers made are released
// and none is returned.
func NewHosted(ctx context.Context, opts Options, count int) ([]*Worker, error) {
	opts.setDefaults()
	if opts.Repo == nil || opts.Registry == nil {
		return nil, errors.New("worker: Options.Repo and Options.Registry are required")
	}
	if count < 1 {
		return nil, fmt.Errorf("worker: %d workers to host, want at least 1", count)
	}
	factory, err := opts.Registry.lookup(opts.Type)
	if err != nil {
		return nil, err
	}
	first := names.WorkerName(opts.group(), opts.Index)
	srv, err := rpc.NewServer(rpc.ServerOptions{
		Host: opts.Host, Port: opts.Port, MaxPayload: opts.MaxPayload, Curve: opts.Curve,
		Logger: opts.Logger.With("worker", first), NoDefault: count > 1,
	})
	if err != nil {
		return nil, fmt.Errorf("worker %s: %w", first, err)
	}
	h := &host{
		srv: srv, loopID: first, every: opts.Heartbeat, users: count, size: count,
		maxRequests: opts.RequestsPerLoop * count, metricsLoop: &telemetry.Loop{},
		loop: newRecordWriter(opts.Repo, opts.Trial.Loop(first), opts.StatusTTL, opts.Logger.With("loop", first)),
	}
	h.metricsLoop.Turned(time.Now())
	workers := make([]*Worker, count)
	errs := make([]error, count)
	sem := make(chan struct{}, newParallel)
	var wg sync.WaitGroup
	for i := range workers {
		o := opts
		o.Index = opts.Index + i
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			workers[i], errs[i] = newWorker(ctx, o, factory, h)
			if errs[i] != nil {
				h.release()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, w := range workers {
			if w != nil {
				w.exit(member.StateInterrupted)
				w.shutdown()
			}
		}
		return nil, err
	}
	return workers, nil
}

// New creates one worker of opts.Type with a server of its own, and
// registers its address. It fails with ErrNameTaken if a live worker has
// the same name.
func New(ctx context.Context, opts Options) (*Worker, error) {
	ws, err := NewHosted(ctx, opts, 1)
	if err != nil {
		return nil, err
	}
	return ws[0], nil
}
