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
// that deadline, not once per (here one hour) IdleWait: under Run and
// under RunMany.
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
		start := polls.Load()
		eventually.True(t, 5*time.Second, "polled at its deadline", func() bool { return polls.Load() >= start+10 })
	}
}
