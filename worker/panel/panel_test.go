package panel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

type echoArgs struct {
	Msg string `msgpack:"msg"`
	N   int    `msgpack:"n"`
}

func startEchoes(t *testing.T, repo nameresolve.Repository, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = startWorker(t, repo, echoworker.TypeName, i).Name()
	}
	return out
}

func TestPanelRequests(t *testing.T) {
	repo := workertest.Repo(t)
	workers := startEchoes(t, repo, 4)
	cp := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)

	t.Run("AutoConnect", func(t *testing.T) {
		got, err := cp.AutoConnect(ctx)
		if err != nil || len(got) != 4 || got[0] != "echo/0" || got[3] != "echo/3" {
			t.Fatalf("AutoConnect = %v, %v", got, err)
		}
	})
	t.Run("Request", func(t *testing.T) {
		var got echoArgs
		if err := cp.Request(ctx, "echo/1", "echo", echoArgs{Msg: "hi", N: 7}, &got); err != nil {
			t.Fatal(err)
		}
		if got != (echoArgs{Msg: "hi", N: 7}) {
			t.Fatalf("echo = %+v", got)
		}
	})
	t.Run("AsyncRequest", func(t *testing.T) {
		futures := make([]*panel.Future, len(workers))
		for i, w := range workers {
			futures[i] = cp.AsyncRequest(ctx, w, "echo", echoArgs{N: i})
		}
		for i, f := range futures {
			var got echoArgs
			if err := f.Wait(ctx, &got); err != nil || got.N != i {
				t.Fatalf("future %d: %+v, %v", i, got, err)
			}
		}
		// A result already in is returned even under an ended context.
		ended, cancel := context.WithCancel(ctx)
		cancel()
		for i, f := range futures {
			var got echoArgs
			if err := f.Wait(ended, &got); err != nil || got.N != i {
				t.Fatalf("future %d after cancel: %+v, %v", i, got, err)
			}
		}
	})
	t.Run("GroupRequestEach", func(t *testing.T) {
		kw := make([]any, len(workers))
		for i := range kw {
			kw[i] = echoArgs{N: 10 * i}
		}
		for i, r := range cp.GroupRequestEach(ctx, workers, "echo", kw) {
			var got echoArgs
			if err := r.Decode(&got); err != nil || got.N != 10*i || r.Worker != workers[i] {
				t.Fatalf("result %d: %+v %+v %v", i, r, got, err)
			}
		}
	})
	t.Run("GroupRequest with a missing worker", func(t *testing.T) {
		group := append([]string{"echo/9"}, workers...)
		res := cp.GroupRequest(ctx, group, "ping", nil)
		if !errors.Is(res[0].Err, panel.ErrWorkerNotFound) {
			t.Fatalf("missing worker: %v", res[0].Err)
		}
		for _, r := range res[1:] {
			var pong string
			if err := r.Decode(&pong); err != nil || pong != "pong" {
				t.Fatalf("%s: %q %v", r.Worker, pong, err)
			}
		}
	})
	t.Run("GroupRequestEach length mismatch", func(t *testing.T) {
		for _, r := range cp.GroupRequestEach(ctx, workers, "echo", []any{1}) {
			if r.Err == nil {
				t.Fatal("want an error for mismatched kwargs")
			}
		}
	})
	t.Run("Workers", func(t *testing.T) {
		list, err := cp.Workers(ctx)
		if err != nil || len(list) != 4 {
			t.Fatalf("Workers = %v, %v", list, err)
		}
		for _, s := range list {
			if s.State != member.StateReady || s.Address == "" {
				t.Fatalf("worker %+v", s)
			}
		}
	})
}

// waitSignal is a name resolve that says when a Wait begins.
type waitSignal struct {
	*nameresolve.Memory
	waiting chan<- struct{}
}

func (w waitSignal) Wait(ctx context.Context, key string) (string, error) {
	select {
	case w.waiting <- struct{}{}:
	default:
	}
	return w.Memory.Wait(ctx, key)
}

func TestPanelConnectWaits(t *testing.T) {
	repo := workertest.Repo(t)
	waiting := make(chan struct{}, 1)
	cp := workertest.Panel(t, waitSignal{Memory: repo, waiting: waiting}, testTrial)
	done := make(chan error, 1)
	go func() { done <- cp.Connect(ctxT(t), "echo/0") }()
	workertest.Received(t, waiting, "Connect waiting for the address")
	startEchoes(t, repo, 1)
	if err := <-done; err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := cp.Connect(ctx, "echo/5"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect to absent worker: %v", err)
	}
}

func TestWorkerStatusLost(t *testing.T) {
	repo := workertest.Repo(t)
	name := startEchoes(t, repo, 1)[0]
	cp := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	if err := cp.Request(ctx, name, "configure", nil, nil); err != nil {
		t.Fatal(err)
	}
	workertest.WaitState(t, cp, name, member.StateConfigured)
	// The memory backend never expires leases: removing the address record is
	// what an expired lease looks like to the cp.
	if err := repo.Delete(ctx, names.Trial(testTrial).Worker(name)); err != nil {
		t.Fatal(err)
	}
	st := workertest.WaitState(t, cp, name, member.StateLost)
	if st.Error == "" {
		t.Fatal("LOST status should say why")
	}
	if _, err := cp.WorkerStatus(ctx, "echo/42"); !errors.Is(err, panel.ErrWorkerNotFound) {
		t.Fatalf("status of unknown worker: %v", err)
	}
}

// noWatch is a name resolve whose watches fail, as a panel's watch that
// lags behind the records looks at the worst.
type noWatch struct{ *nameresolve.Memory }

func (noWatch) Watch(context.Context, string) (<-chan nameresolve.Event, error) {
	return nil, errors.New("no watch here")
}

// A worker that comes back at another address is reached there at the
// first request, single or group, even when no watch event has dropped
// the connection to its old address: every request resolves the name.
func TestPanelFollowsMovedWorker(t *testing.T) {
	mem := workertest.Repo(t)
	cp := workertest.Panel(t, noWatch{mem}, testTrial)
	first := startWorker(t, mem, echoworker.TypeName, 0)
	ctx := ctxT(t)
	if err := cp.Request(ctx, "echo/0", "ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	first.Cancel()
	first.Wait(t, 10*time.Second)
	second := startWorker(t, mem, echoworker.TypeName, 0)
	if second.W.Addr() == first.W.Addr() {
		t.Skip("the new worker got the old port; nothing moved")
	}
	if err := cp.Request(ctx, "echo/0", "ping", nil, nil); err != nil {
		t.Fatalf("request to the moved worker: %v", err)
	}
	second.Cancel()
	second.Wait(t, 10*time.Second)
	third := startWorker(t, mem, echoworker.TypeName, 0)
	if third.W.Addr() == second.W.Addr() {
		t.Skip("the new worker got the old port; nothing moved")
	}
	if r := cp.GroupRequest(ctx, []string{"echo/0"}, "ping", nil); r[0].Err != nil {
		t.Fatalf("group request to the moved worker: %v", r[0].Err)
	}
}

// noMirror is a name resolve that cannot open mirrors, as a backend
// without watches would be.
type noMirror struct{ *nameresolve.Memory }

func (noMirror) Mirror(context.Context, string) (nameresolve.Mirror, error) {
	return nil, errors.New("no mirror here")
}

// A panel whose name resolve cannot mirror falls back to listings: group
// requests, Workers and Addresses still see every worker, and a stopped
// worker is reported as not found rather than tried at its old address.
func TestPanelWithoutMirror(t *testing.T) {
	mem := workertest.Repo(t)
	workers := startEchoes(t, mem, 3)
	cp := workertest.Panel(t, noMirror{mem}, testTrial)
	ctx := ctxT(t)
	for _, r := range cp.GroupRequest(ctx, workers, "ping", nil) {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Worker, r.Err)
		}
	}
	if ws, err := cp.Workers(ctx); err != nil || len(ws) != 3 {
		t.Fatalf("Workers = %v, %v", ws, err)
	}
	if addrs, err := cp.Addresses(ctx); err != nil || len(addrs) != 3 {
		t.Fatalf("Addresses = %v, %v", addrs, err)
	}
	if err := mem.Delete(ctx, testTrial.Worker("echo/2")); err != nil {
		t.Fatal(err)
	}
	r := cp.GroupRequest(ctx, workers, "ping", nil)
	if r[0].Err != nil || !errors.Is(r[2].Err, panel.ErrWorkerNotFound) {
		t.Fatalf("after echo/2's record went: %v, %v", r[0].Err, r[2].Err)
	}
}

// laggingRepo's mirrors lag the records as far as a watch can: Get answers
// from a copy taken when the mirror opened or last synced, so that a test
// controls when the panel's cached addresses go stale. Syncs counts the
// round trips the panel asked for.
type laggingRepo struct {
	*nameresolve.Memory
	syncs  *atomic.Int32
	opened *atomic.Pointer[laggingMirror] // the last mirror opened
}

func (r laggingRepo) Mirror(ctx context.Context, prefix string) (nameresolve.Mirror, error) {
	m, err := r.Memory.Mirror(ctx, prefix)
	if err != nil {
		return nil, err
	}
	l := &laggingMirror{Mirror: m, syncs: r.syncs}
	l.snapshot()
	r.opened.Store(l)
	return l, nil
}

type laggingMirror struct {
	nameresolve.Mirror
	syncs *atomic.Int32
	mu    sync.Mutex
	copy  map[string]string
}

func (l *laggingMirror) snapshot() {
	c := map[string]string{}
	for _, e := range l.Mirror.Entries() {
		c[e.Key] = e.Value
	}
	l.mu.Lock()
	l.copy = c
	l.mu.Unlock()
}

func (l *laggingMirror) Sync(ctx context.Context) error {
	l.syncs.Add(1)
	if err := l.Mirror.Sync(ctx); err != nil {
		return err
	}
	l.snapshot()
	return nil
}

// set makes the copy hold value under key, as a copy that missed the
// record's later changes would.
func (l *laggingMirror) set(key, value string) {
	l.mu.Lock()
	l.copy[key] = value
	l.mu.Unlock()
}

func (l *laggingMirror) Get(key string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.copy[key]
	return v, ok
}

// lagged is a panel on a laggingRepo, with the mirror it opened.
type lagged struct {
	*panel.ControlPanel
	opened *atomic.Pointer[laggingMirror]
}

func (l lagged) mirror(t *testing.T) *laggingMirror {
	t.Helper()
	m := l.opened.Load()
	if m == nil {
		t.Fatal("the panel opened no mirror")
	}
	return m
}

// A single request goes to the address the panel's mirror holds, with no
// round trip to the name server; where that address went stale it is found
// out and the request reaches the worker at its new address: when nothing
// answers at the old one (the worker restarted elsewhere), and when another
// worker answers there (unknown_worker).
func TestPanelRequestCachedAddress(t *testing.T) {
	mem := workertest.Repo(t)
	var syncs atomic.Int32
	var opened atomic.Pointer[laggingMirror]
	lagging := laggingRepo{mem, &syncs, &opened}
	cp := lagged{workertest.Panel(t, lagging, testTrial), &opened}
	ctx := ctxT(t)
	first := startWorker(t, mem, echoworker.TypeName, 0)
	if err := cp.Request(ctx, "echo/0", "ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	before := syncs.Load()
	for range 10 {
		if err := cp.Request(ctx, "echo/0", "ping", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := syncs.Load() - before; n != 0 {
		t.Errorf("10 requests to a worker whose address is cached asked the name server %d times, want 0", n)
	}

	// Restarted elsewhere: nothing answers at the cached address.
	first.Cancel()
	first.Wait(t, 10*time.Second)
	second := startWorker(t, mem, echoworker.TypeName, 0)
	if second.W.Addr() == first.W.Addr() {
		t.Skip("the new worker got the old port; nothing moved")
	}
	var reply map[string]any
	if err := cp.Request(ctx, "echo/0", "echo", map[string]any{"n": 1}, &reply); err != nil {
		t.Fatalf("request to the worker restarted elsewhere: %v", err)
	}

	// Another worker is at the cached address: it refuses the request for a
	// worker it does not serve (the request is not executed), and the panel
	// resolves echo/0 afresh.
	other := startWorker(t, mem, echoworker.TypeName, 1)
	if err := cp.Request(ctx, "echo/1", "ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	cp.mirror(t).set(testTrial.Worker("echo/0"), other.W.Addr())
	before = syncs.Load()
	if err := cp.Request(ctx, "echo/0", "ping", nil, nil); err != nil {
		t.Fatalf("request to echo/0 cached at echo/1's address: %v", err)
	}
	if syncs.Load() == before {
		t.Error("the panel did not resolve echo/0 again after echo/1 refused its request")
	}
}
