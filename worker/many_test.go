package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// startMany hosts n workers of typ in this process (NewHosted: one
// server, one loop) and runs them all with one RunMany; the returned
// channel gets its error.
func startMany(t *testing.T, repo nameresolve.Repository, typ string, n int, idle time.Duration) (context.CancelFunc, []string, <-chan error) {
	t.Helper()
	return startHosted(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: typ, Host: "127.0.0.1", Repo: repo,
		Logger: workertest.Logger(t, slog.LevelWarn), IdleWait: idle,
	}, n)
}

func startHosted(t *testing.T, opts worker.Options, n int) (context.CancelFunc, []string, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	workers, err := worker.NewHosted(ctx, opts, n)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	names := make([]string, n)
	for i, w := range workers {
		names[i] = w.Name()
	}
	done := make(chan error, 1)
	go func() {
		done <- worker.RunMany(ctx, workers)
		close(done) // the cleanup's receive returns after the test's
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return cancel, names, done
}

// Many workers in one loop answer group requests, go through their
// lifecycle, exit one by one, and are interrupted together when ctx ends.
func TestRunManyServesAGroup(t *testing.T) {
	repo := workertest.Repo(t)
	cancel, names, done := startMany(t, repo, echoworker.TypeName, 32, time.Hour)
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	if err := panel.Connect(ctx, names...); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"configure", "start"} {
		for _, r := range panel.GroupRequest(ctx, names, cmd, nil) {
			if r.Err != nil {
				t.Fatalf("%s: %v", cmd, r.Err)
			}
		}
	}
	for round := range 3 {
		results := panel.GroupRequest(ctx, names, "echo", map[string]any{"round": round})
		for i, r := range results {
			var got map[string]int
			if err := r.Decode(&got); err != nil || r.Worker != names[i] || got["round"] != round {
				t.Fatalf("round %d, %s: %+v %v", round, names[i], got, err)
			}
		}
	}
	for _, name := range names {
		if st := workertest.WaitState(t, panel, name, member.StateRunning); st.State != member.StateRunning {
			t.Fatalf("%s: %+v", name, st)
		}
	}
	// One exits: the others keep answering.
	if err := panel.Request(ctx, names[0], "exit", nil, nil); err != nil {
		t.Fatal(err)
	}
	workertest.WaitState(t, panel, names[0], member.StateCompleted)
	for _, r := range panel.GroupRequest(ctx, names[1:], "ping", nil) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunMany did not return after cancel")
	}
	for _, name := range names[1:] {
		workertest.WaitState(t, panel, name, member.StateInterrupted)
	}
}

// A worker of many that fails makes RunMany's error say so once they have
// all ended; the others are unaffected.
func TestRunManyReportsAFailure(t *testing.T) {
	repo := workertest.Repo(t)
	cancel, names, done := startMany(t, repo, "scripted", 3, 10*time.Millisecond)
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	if err := panel.Connect(ctx, names...); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		kw := map[string]any{}
		if i == 1 {
			kw["fail_after"] = 2
		}
		if err := panel.Request(ctx, name, "configure", kw, nil); err != nil {
			t.Fatal(err)
		}
		if err := panel.Request(ctx, name, "start", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	workertest.WaitState(t, panel, names[1], member.StateError)
	for _, name := range []string{names[0], names[2]} {
		var pong string
		if err := panel.Request(ctx, name, "ping", nil, &pong); err != nil {
			t.Fatalf("%s after %s failed: %v", name, names[1], err)
		}
	}
	if err := panel.Request(ctx, names[1], "exit", nil, nil); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := <-done
	if !errors.Is(err, worker.ErrFailed) {
		t.Fatalf("RunMany: %v, want ErrFailed", err)
	}
}
