package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
	zmq "github.com/pebbe/zmq4"
)

// scripted is a worker type whose polls follow its configuration, so tests
// can make it produce samples, fail, panic or finish.
type scripted struct {
	cfg      scriptConfig
	polls    int
	pull     *zmq.Socket
	received int
}

type scriptConfig struct {
	SamplesPerPoll int64 `msgpack:"samples_per_poll"`
	FailAfter      int   `msgpack:"fail_after"`  // polls; 0 = never
	PanicAfter     int   `msgpack:"panic_after"` // polls; 0 = never
	DoneAfter      int   `msgpack:"done_after"`  // polls; 0 = never
	RejectConfig   bool  `msgpack:"reject_config"`
	// BlockPoll: a poll waits for the loop's context to end and returns its
	// error, as a poll cut short by a shutdown does.
	BlockPoll bool `msgpack:"block_poll"`
	// Hang names a channel of hangs: a poll waits until it is closed (or
	// the loop's context ends), a loop stuck in its environment.
	Hang string `msgpack:"hang"`
	// PullAddr: bind a PULL socket there; polls count what arrives and
	// report it as the warning, so a test can see the worker woke up.
	PullAddr string `msgpack:"pull_addr"`
	// Signal names a channel of pollSignals that gets a value as each
	// poll ends (a blocking poll: as it begins to block), so a test knows
	// where the loop is without sleeping.
	Signal string `msgpack:"signal"`
}

// pollSignals maps scriptConfig.Signal names to their channels.
var pollSignals sync.Map

// hangs maps scriptConfig.Hang names to channels a test closes.
var hangs sync.Map

// pollSignal registers a channel for scriptConfig.Signal name.
func pollSignal(t *testing.T, name string) chan struct{} {
	ch := make(chan struct{}, 64)
	pollSignals.Store(name, ch)
	t.Cleanup(func() { pollSignals.Delete(name) })
	return ch
}

func (s *scripted) signal() {
	if ch, ok := pollSignals.Load(s.cfg.Signal); ok {
		select {
		case ch.(chan struct{}) <- struct{}{}:
		default:
		}
	}
}

func (s *scripted) Configure(_ context.Context, args rpc.Args) error {
	var cfg scriptConfig
	if err := args.Decode(&cfg); err != nil {
		return err
	}
	if cfg.RejectConfig {
		return errors.New("config rejected on purpose")
	}
	s.cfg = cfg
	if cfg.PullAddr != "" && s.pull == nil {
		pull, err := bindPull(cfg.PullAddr)
		if err != nil {
			return err
		}
		s.pull = pull
	}
	return nil
}

func (s *scripted) Sockets() []*zmq.Socket {
	if s.pull == nil {
		return nil
	}
	return []*zmq.Socket{s.pull}
}

func (s *scripted) Warning() string {
	if s.received == 0 {
		return ""
	}
	return fmt.Sprintf("received %d", s.received)
}

func (s *scripted) Poll(ctx context.Context) (worker.PollResult, error) {
	s.polls++
	defer s.signal()
	if s.cfg.BlockPoll {
		s.signal()
		<-ctx.Done()
		return worker.PollResult{}, fmt.Errorf("flush: %w", ctx.Err())
	}
	if ch, ok := hangs.Load(s.cfg.Hang); ok {
		s.signal()
		select {
		case <-ch.(chan struct{}):
		case <-ctx.Done():
		}
	}
	for s.pull != nil {
		if _, err := s.pull.Recv(zmq.DONTWAIT); err != nil {
			break
		}
		s.received++
	}
	switch {
	case s.cfg.FailAfter > 0 && s.polls >= s.cfg.FailAfter:
		return worker.PollResult{}, errors.New("environment exploded")
	case s.cfg.PanicAfter > 0 && s.polls >= s.cfg.PanicAfter:
		panic("scripted panic")
	case s.cfg.DoneAfter > 0 && s.polls >= s.cfg.DoneAfter:
		return worker.PollResult{Done: true}, nil
	}
	return worker.PollResult{Samples: s.cfg.SamplesPerPoll}, nil
}

func (s *scripted) Stats() map[string]any { return map[string]any{"scripted_polls": s.polls} }
func (s *scripted) Close() error {
	if s.pull != nil {
		return s.pull.Close()
	}
	return nil
}

func (s *scripted) Commands() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		"boom": func(context.Context, rpc.Args) (any, error) { panic("handler boom") },
		"typed": rpc.Typed(func(_ context.Context, a struct {
			N int `msgpack:"n"`
		}) (int, error) {
			return a.N * 2, nil
		}),
	}
}

// testTypes are the worker types these tests run.
var testTypes = workertest.Registry(map[string]worker.Factory{
	"scripted":          func(worker.Info) (worker.Impl, error) { return &scripted{}, nil },
	echoworker.TypeName: echoworker.New,
})

var testTrial = names.NewTrial("unit", "t1")

func startWorker(t *testing.T, repo nameresolve.Repository, typ string, index int) *workertest.Running {
	t.Helper()
	return startWorkerIdle(t, repo, typ, index, 10*time.Millisecond)
}

func startWorkerIdle(t *testing.T, repo nameresolve.Repository, typ string, index int, idle time.Duration) *workertest.Running {
	t.Helper()
	return workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: typ, Index: index, Host: "127.0.0.1", Repo: repo,
		IdleWait: idle, Logger: workertest.Logger(t, slog.LevelDebug),
	})
}

func ctxT(t *testing.T) context.Context { return workertest.Ctx(t, 10*time.Second) }

func TestLifecycleCommands(t *testing.T) {
	type step struct {
		cmd       string
		kwargs    any
		wantState member.State // of the reply, when no error
		wantErr   string       // rpc error type
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"happy path", []step{
			{cmd: "configure", wantState: member.StateConfigured},
			{cmd: "start", wantState: member.StateRunning},
			{cmd: "pause", wantState: member.StatePaused},
			{cmd: "start", wantState: member.StateRunning},
			{cmd: "exit", wantState: member.StateCompleted},
		}},
		{"start before configure", []step{
			{cmd: "start", wantErr: worker.ErrTypeBadState},
			{cmd: "pause", wantErr: worker.ErrTypeBadState},
			{cmd: "configure", wantState: member.StateConfigured},
			{cmd: "configure", wantState: member.StateConfigured}, // reconfigure
			{cmd: "start", wantState: member.StateRunning},
			{cmd: "configure", wantErr: worker.ErrTypeBadState},
		}},
		{"bad config is the caller's fault", []step{
			{cmd: "configure", kwargs: map[string]any{"fail_after": "soon"}, wantErr: rpc.ErrTypeBadArguments},
			{cmd: "status", wantState: member.StateReady},
			{cmd: "configure", wantState: member.StateConfigured},
		}},
		{"rejected config is an error", []step{
			{cmd: "configure", kwargs: map[string]any{"reject_config": true}, wantErr: rpc.ErrTypeHandlerError},
			{cmd: "status", wantState: member.StateError},
			{cmd: "start", wantErr: worker.ErrTypeBadState},
		}},
		{"interrupt", []step{
			{cmd: "configure", wantState: member.StateConfigured},
			{cmd: "interrupt", wantState: member.StateInterrupted},
		}},
		{"unknown command keeps worker", []step{
			{cmd: "fly", wantErr: rpc.ErrTypeUnknownCommand},
			{cmd: "status", wantState: member.StateReady},
		}},
		{"wrong argument type", []step{
			{cmd: "typed", kwargs: map[string]any{"n": "two"}, wantErr: rpc.ErrTypeBadArguments},
			{cmd: "status", wantState: member.StateReady},
		}},
		{"handler panic moves to ERROR", []step{
			{cmd: "boom", wantErr: rpc.ErrTypeHandlerPanic},
			{cmd: "status", wantState: member.StateError},
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			startWorker(t, repo, "scripted", i)
			panel := workertest.Panel(t, repo, testTrial)
			name := names.WorkerName("scripted", i)
			for j, s := range c.steps {
				var st member.Status
				err := panel.Request(ctxT(t), name, s.cmd, s.kwargs, &st)
				if s.wantErr != "" {
					var re *rpc.Error
					if !errors.As(err, &re) || re.Type != s.wantErr {
						t.Fatalf("step %d %s: err = %v, want rpc error %s", j, s.cmd, err, s.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d %s: %v", j, s.cmd, err)
				}
				if st.State != s.wantState {
					t.Fatalf("step %d %s: state %s, want %s", j, s.cmd, st.State, s.wantState)
				}
			}
		})
	}
}

func TestPollOutcomes(t *testing.T) {
	cases := []struct {
		name      string
		config    map[string]any
		wantState member.State
		wantError string
		wantRun   error
	}{
		{"poll error", map[string]any{"fail_after": 3}, member.StateError, "environment exploded", worker.ErrFailed},
		{"poll panic", map[string]any{"panic_after": 2}, member.StateError, "scripted panic", worker.ErrFailed},
		{"done", map[string]any{"done_after": 5}, member.StateCompleted, "", nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			r := startWorker(t, repo, "scripted", i)
			panel := workertest.Panel(t, repo, testTrial)
			name := r.Name()
			for _, cmd := range []struct {
				c  string
				kw any
			}{{"configure", c.config}, {"start", nil}} {
				if err := panel.Request(ctxT(t), name, cmd.c, cmd.kw, nil); err != nil {
					t.Fatal(err)
				}
			}
			st := workertest.WaitState(t, panel, name, c.wantState)
			if !strings.Contains(st.Error, c.wantError) {
				t.Fatalf("status error %q, want it to mention %q", st.Error, c.wantError)
			}
			// The worker stays up and answers after the outcome, until told to exit.
			var reply string
			if err := panel.Request(ctxT(t), name, "ping", nil, &reply); err != nil || reply != "pong" {
				t.Fatalf("ping after outcome: %q, %v", reply, err)
			}
			if err := panel.Request(ctxT(t), name, "exit", nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(t, 10*time.Second); !errors.Is(err, c.wantRun) && (err != nil || c.wantRun != nil) {
				t.Fatalf("Run = %v, want %v", err, c.wantRun)
			}
			st = workertest.WaitState(t, panel, name, c.wantState) // final record keeps the outcome
			if st.Address != "" {
				if _, err := repo.Get(ctxT(t), testTrial.Worker(name)); !errors.Is(err, nameresolve.ErrNotFound) {
					t.Fatalf("address record still there after exit: %v", err)
				}
			}
		})
	}
}

func TestStatsCountSamples(t *testing.T) {
	repo := workertest.Repo(t)
	r := startWorker(t, repo, "scripted", 0)
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	if err := panel.Request(ctx, r.Name(), "configure", map[string]any{"samples_per_poll": 4}, nil); err != nil {
		t.Fatal(err)
	}
	if err := panel.Request(ctx, r.Name(), "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	for {
		var stats struct {
			Samples       int64  `msgpack:"samples"`
			Polls         int64  `msgpack:"polls"`
			ScriptedPolls *int64 `msgpack:"scripted_polls"`
		}
		if err := panel.Request(ctx, r.Name(), "stats", nil, &stats); err != nil {
			t.Fatal(err)
		}
		if stats.Samples != 4*stats.Polls {
			t.Fatalf("samples %d after %d polls of 4", stats.Samples, stats.Polls)
		}
		if stats.ScriptedPolls == nil || *stats.ScriptedPolls < stats.Polls {
			t.Fatalf("type stats missing or behind: %+v", stats)
		}
		if stats.Samples >= 400 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDuplicateNameFails(t *testing.T) {
	repo := workertest.Repo(t)
	first := startWorker(t, repo, echoworker.TypeName, 0)
	_, err := worker.New(context.Background(), worker.Options{
		Trial: testTrial, Registry: testTypes, Type: echoworker.TypeName, Index: 0, Host: "127.0.0.1", Repo: repo,
	})
	if !errors.Is(err, worker.ErrNameTaken) {
		t.Fatalf("second echo/0: err = %v, want ErrNameTaken", err)
	}
	if !strings.Contains(err.Error(), first.W.Addr()) {
		t.Fatalf("error %q should name the live worker's address %s", err, first.W.Addr())
	}
}

func TestUnknownType(t *testing.T) {
	repo := workertest.Repo(t)
	_, err := worker.New(context.Background(), worker.Options{Trial: testTrial, Registry: testTypes, Type: "nope", Repo: repo, Host: "127.0.0.1"})
	if err == nil || !strings.Contains(err.Error(), "echo") {
		t.Fatalf("err = %v, want it to list the known types", err)
	}
}

func TestCancelInterrupts(t *testing.T) {
	repo := workertest.Repo(t)
	r := startWorker(t, repo, echoworker.TypeName, 0)
	panel := workertest.Panel(t, repo, testTrial)
	r.Cancel()
	if err := r.Wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	st := workertest.WaitState(t, panel, r.Name(), member.StateInterrupted)
	if st.PID != os.Getpid() {
		t.Fatalf("status pid %d", st.PID)
	}
}

// An idle worker sleeps on its type's sockets too: input there wakes it
// although its idle wait is far longer than the test may take.
func TestIdleWorkerWakesOnItsSockets(t *testing.T) {
	repo := workertest.Repo(t)
	r := startWorkerIdle(t, repo, "scripted", 0, time.Hour)
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	addr := "inproc://scripted-wake"
	polled := pollSignal(t, t.Name())
	if err := panel.Request(ctx, r.Name(), "configure", map[string]any{"pull_addr": addr, "signal": t.Name()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := panel.Request(ctx, r.Name(), "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	push, err := zmq.NewSocket(zmq.PUSH)
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	push.SetLinger(0)
	if err := push.Connect(addr); err != nil {
		t.Fatal(err)
	}
	// The loop polls once more in the iteration that answered "start"; the
	// next poll finds no request either and is followed by the idle wait.
	// What is pushed after it can only be read if the socket wakes the wait.
	workertest.Received(t, polled, "the poll after start")
	workertest.Received(t, polled, "the poll before the idle wait")
	if _, err := push.Send("work", 0); err != nil {
		t.Fatal(err)
	}
	// No request goes to the worker from here on: only the pushed message can wake it,
	// and the status record it then writes carries the warning.
	for {
		st, err := panel.WorkerStatus(ctx, r.Name())
		if err == nil && st.Warning == "received 1" {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("worker did not wake on its socket: %+v %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A poll cut short by the worker's own shutdown is an interruption, not a
// failure: Run returns nil and the final state is INTERRUPTED.
func TestShutdownDuringPollIsNotFailure(t *testing.T) {
	repo := workertest.Repo(t)
	r := startWorker(t, repo, "scripted", 0)
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	blocked := pollSignal(t, t.Name())
	if err := panel.Request(ctx, r.Name(), "configure", map[string]any{"block_poll": true, "signal": t.Name()}, nil); err != nil {
		t.Fatal(err)
	}
	if err := panel.Request(ctx, r.Name(), "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Received(t, blocked, "the blocking poll")
	r.Cancel()
	if err := r.Wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run after a cancel during poll: %v", err)
	}
	workertest.WaitState(t, panel, r.Name(), member.StateInterrupted)
}

// A loop stuck in a poll keeps its address record (the lease is the etcd
// client's business) but its heartbeat stops: the panel reports HUNG, and
// RUNNING again once the loop turns.
func TestStuckLoopIsHung(t *testing.T) {
	repo := workertest.Repo(t)
	r := workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: "scripted", Index: 0, Host: "127.0.0.1", Repo: repo,
		IdleWait: 10 * time.Millisecond, Heartbeat: 20 * time.Millisecond, Logger: workertest.Logger(t, slog.LevelInfo),
	})
	const bound = 300 * time.Millisecond
	panel := panel.New(repo, testTrial, panel.Options{HungAfter: bound})
	t.Cleanup(func() { panel.Close() })
	release := make(chan struct{})
	hangs.Store("stuck", release)
	t.Cleanup(func() { hangs.Delete("stuck") })
	polling := pollSignal(t, "stuck")
	ctx := ctxT(t)
	if err := panel.Request(ctx, r.Name(), "configure", map[string]any{"hang": "stuck", "signal": "stuck"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := panel.Request(ctx, r.Name(), "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	workertest.Received(t, polling, "the poll hangs")
	stuck := time.Now()
	st := workertest.WaitState(t, panel, r.Name(), member.StateHung)
	t.Logf("HUNG reported %v after the loop stuck (bound %v)", time.Since(stuck).Round(time.Millisecond), bound)
	if st.Address == "" || !strings.Contains(st.Error, "RUNNING but the loop has not turned for") {
		t.Errorf("HUNG status: %+v", st)
	}
	if all, err := panel.Workers(ctx); err != nil || len(all) != 1 || all[0].State != member.StateHung {
		t.Errorf("Workers: %+v, %v", all, err)
	}
	close(release)
	workertest.WaitState(t, panel, r.Name(), member.StateRunning)
}
