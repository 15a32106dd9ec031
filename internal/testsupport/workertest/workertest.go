package workertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/panel"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/worker/member"

	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/policy"
)

// Registry is a registry of the given worker types, for a test package's
// variable (its Options.Registry). On an error it prints it and exits: no
// test runs yet that could fail.
func Registry(types map[string]worker.Factory) *worker.Registry {
	reg := worker.NewRegistry()
	for name, f := range types {
		if err := reg.Register(name, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	return reg
}

// Repo is an in-memory name resolve closed when the test ends, after
// whatever the test starts on it later (cleanups run last-in first-out).
func Repo(t testing.TB) *nameresolve.Memory {
	repo := nameresolve.NewMemory()
	t.Cleanup(func() { repo.Close() })
	return repo
}

// Logger sends logs at level and above to the test's log, shown on failure
// or with -v. Whatever logs to it must stop before the test's cleanups are
// over (t.Log panics after that); a worker given it through Start is
// stopped by Start's cleanup.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Ctx is a context cancelled after d or when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Panel is a control panel for trial's workers on repo, closed when the
// test ends.
func Panel(t testing.TB, repo nameresolve.Repository, trial names.Trial) *panel.ControlPanel {
	p := panel.New(repo, trial, panel.Options{})
	t.Cleanup(func() { p.Close() })
	return p
}

// Running is a worker started in-process with its Run loop on a goroutine
// of its own.
type Running struct {
	// W is the worker. Only what does not change while it runs (Name,
	// Addr) may be read from other goroutines.
	W      *worker.Worker
	cancel context.CancelFunc
	done   chan struct{}
	err    error // what Run returned; read after done
}

// Start creates the worker of opts (worker.New) and runs its loop until the
// test ends or the worker stops; the test's cleanup cancels the loop and
// waits for it. What Run returns is the test's to check (Stop, Wait);
// StartChecked fails the test on it instead.
func Start(t testing.TB, opts worker.Options) *Running {
	t.Helper()
	return start(t, opts, false)
}

// StartChecked is Start for a worker that must not end in error: if its
// Run returns an error, the test fails at cleanup.
func StartChecked(t testing.TB, opts worker.Options) *Running {
	t.Helper()
	return start(t, opts, true)
}

func start(t testing.TB, opts worker.Options, check bool) *Running {
	t.Helper()
	w, err := worker.New(context.Background(), opts)
	if err != nil {
		t.Fatalf("start %s/%d: %v", opts.Type, opts.Index, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{W: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = w.Run(ctx)
	}()
	t.Cleanup(func() {
		if err := r.Stop(); err != nil && check {
			t.Errorf("worker %s: %v", r.Name(), err)
		}
	})
	return r
}

// Name is the worker's name, "{type}/{index}".
func (r *Running) Name() string { return r.W.Name() }

// Cancel ends the worker's loop as an interrupt does (its Close runs); it
// does not wait. It may be called again.
func (r *Running) Cancel() { r.cancel() }

// Done is closed once the worker's loop has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Stop cancels the worker's loop, waits for it to return and returns what
// Run did. It may be called again.
func (r *Running) Stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// Wait waits up to d for the worker's loop to return (on its own or after
// Cancel) and returns what Run did; the test fails if it has not by then.
func (r *Running) Wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		t.Fatalf("worker %s did not exit within %v", r.Name(), d)
		return nil
	}
}

// Received waits up to 10 s for a value on ch.
func Received(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	eventually.True(t, 10*time.Second, what, func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	})
}

// WaitState waits up to 10 s for cp to report worker name in state want,
// and returns its status.
func WaitState(t testing.TB, cp *panel.ControlPanel, name string, want member.State) member.Status {
	t.Helper()
	var st member.Status
	eventually.NoError(t, 10*time.Second, name+" to be "+string(want), func() (err error) {
		st, err = cp.WorkerStatus(Ctx(t, 10*time.Second), name)
		if err == nil && st.State != want {
			err = fmt.Errorf("status %+v", st)
		}
		return err
	})
	return st
}

// Main registers the built-in environments, as rlctl does at start (no
// worker type registers them itself), runs the tests and exits: the
// TestMain of packages whose tests configure workers that name
// environments.
func Main(m *testing.M) {
	if err := env.Register(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Args encodes kwargs as a command's arguments, as a control panel sends
// them: for calling a type's Configure or Check directly.
func Args(t testing.TB, kwargs map[string]any) rpc.Args {
	t.Helper()
	raw, err := msgpack.Marshal(kwargs)
	if err != nil {
		t.Fatal(err)
	}
	return rpc.RawArgs(raw)
}

// NewPolicy is a new policy of environment envName's default network
// (policy.ConfigForEnv, seed 0), for tests that need a network's
// parameters, layout or answers; env.Register has run.
func NewPolicy(t testing.TB, envName string, envCfg map[string]any) *policy.ActorCritic {
	t.Helper()
	if err := env.Register(); err != nil {
		t.Fatal(err)
	}
	pc, err := policy.ConfigForEnv(envName, envCfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
