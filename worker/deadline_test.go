package worker_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
)

// deadlined is a worker type that does nothing but wants to be polled
// every 10 ms (worker.Deadliner), as a replay worker with parked requests.
type deadlined struct{ polls *atomic.Int64 }

func (d deadlined) Configure(context.Context, rpc.Args) error { return nil }
func (d deadlined) Poll(context.Context) (worker.PollResult, error) {
	d.polls.Add(1)
	return worker.PollResult{}, nil
}
func (d deadlined) Stats() map[string]any  { return map[string]any{} }
func (d deadlined) Close() error           { return nil }
func (d deadlined) IdleFor() time.Duration { return 10 * time.Millisecond }

// An idle RUNNING worker whose type has a deadline of its own is polled at
// that deadline, not once per (here one hour) IdleWait nor once per the
// loop's sweep (DefaultIdleWait): under Run and under RunMany. IdleFor is
// the same 10 ms every time it is asked, as a DQN trainer's with samples
// requested; a loop that asked it again after the wait found the deadline
// 10 ms away again and left the worker to the sweep.
func TestDeadlinerIsPolledAtItsDeadline(t *testing.T) {
	for _, many := range []bool{false, true} {
		var polls atomic.Int64
		reg := workertest.Registry(map[string]worker.Factory{"deadlined": func(worker.Info) (worker.Impl, error) {
			return deadlined{&polls}, nil
		}})
		repo := workertest.Repo(t)
		opts := worker.Options{Trial: testTrial, Registry: reg, Type: "deadlined", Host: "127.0.0.1", Repo: repo,
			IdleWait: time.Hour, Logger: workertest.Logger(t, slog.LevelWarn)}
		var name string
		if many {
			ctx, cancel := context.WithCancel(context.Background())
			w, err := worker.New(ctx, opts)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			name = w.Name()
			done := make(chan error, 1)
			go func() { done <- worker.RunMany(ctx, []*worker.Worker{w}) }()
			t.Cleanup(func() { cancel(); <-done })
		} else {
			name = workertest.Start(t, opts).Name()
		}
		panel := workertest.Panel(t, repo, testTrial)
		for _, cmd := range []string{"configure", "start"} {
			if err := panel.Request(ctxT(t), name, cmd, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		start, began := polls.Load(), time.Now()
		eventually.True(t, 10*time.Second, "polled at its deadline", func() bool { return polls.Load() >= start+30 })
		// Sweeps alone would poll it once per DefaultIdleWait; deadlines
		// ten times as often. A slow machine delays both alike.
		sweeps := float64(time.Since(began)) / float64(worker.DefaultIdleWait)
		if got := float64(polls.Load() - start); got < 1.5*(sweeps+1) {
			t.Fatalf("many=%v: %.0f polls in %.1f sweep intervals: polled by the sweep, not at its deadline", many, got, sweeps)
		}
	}
}

// busy is a worker type whose every Poll has work, so its loop never
// waits on its sockets.
type busy struct{ polls *atomic.Int64 }

func (b busy) Configure(context.Context, rpc.Args) error { return nil }
func (b busy) Poll(context.Context) (worker.PollResult, error) {
	b.polls.Add(1)
	return worker.PollResult{Batches: 1}, nil
}
func (b busy) Stats() map[string]any { return map[string]any{} }
func (b busy) Close() error          { return nil }

// A loop whose worker is always busy reads its server only now and then
// (it skips the wait, so no descriptor says a request came): every request
// is still answered, and the worker goes on polling.
func TestBusyLoopAnswersRequests(t *testing.T) {
	var polls atomic.Int64
	reg := workertest.Registry(map[string]worker.Factory{"busy": func(worker.Info) (worker.Impl, error) {
		return busy{&polls}, nil
	}})
	repo := workertest.Repo(t)
	w := workertest.Start(t, worker.Options{Trial: testTrial, Registry: reg, Type: "busy", Host: "127.0.0.1", Repo: repo,
		Logger: workertest.Logger(t, slog.LevelWarn)})
	panel := workertest.Panel(t, repo, testTrial)
	for _, cmd := range []string{"configure", "start"} {
		if err := panel.Request(ctxT(t), w.Name(), cmd, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	const requests = 200
	before := polls.Load()
	for i := range requests {
		if err := panel.Request(ctxT(t), w.Name(), "ping", nil, nil); err != nil {
			t.Fatalf("request %d to a busy worker: %v", i, err)
		}
	}
	if n := polls.Load() - before; n < requests {
		t.Fatalf("%d polls during %d requests: the worker was not kept busy", n, requests)
	}
}
