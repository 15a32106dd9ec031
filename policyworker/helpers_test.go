package policyworker_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
	zmq "github.com/pebbe/zmq4"
	"golang.org/x/sys/unix"
)

// testTypes are the worker types these tests run.
var testTypes = workertest.Registry(map[string]worker.Factory{policyworker.TypeName: policyworker.New})

// TestMain registers the environments, as rlctl does: the tests also
// build local policies for CartPole to compare against.
func TestMain(m *testing.M) { workertest.Main(m) }

var testTrial = names.NewTrial("unit", "policyworker")

// testLogger sends logs to the test's log, shown on failure or with -v.
func testLogger(t testing.TB) *slog.Logger { return workertest.Logger(t, slog.LevelInfo) }

// fixture is a policy worker running in-process and a control panel
// connected to it; metrics is the registry the worker records into.
type fixture struct {
	repo    nameresolve.Repository
	panel   *panel.ControlPanel
	name    string
	metrics *telemetry.Registry
}

// startWorker starts policy worker index in-process. idleWait is its idle
// tick; the socket wake-up makes its length irrelevant to latency.
func startWorker(t testing.TB, repo nameresolve.Repository, index int, idleWait time.Duration, log *slog.Logger) *fixture {
	t.Helper()
	reg := telemetry.NewRegistry()
	r := workertest.StartChecked(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: policyworker.TypeName, Index: index, Host: "127.0.0.1",
		Repo: repo, IdleWait: idleWait, Logger: log, Metrics: reg, ConditionHold: 50 * time.Millisecond,
	})
	return &fixture{repo: repo, panel: workertest.Panel(t, repo, testTrial), name: r.Name(), metrics: reg}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return startWorker(t, workertest.Repo(t), 0, 10*time.Millisecond, testLogger(t))
}

func ctxT(t testing.TB) context.Context { return workertest.Ctx(t, 10*time.Second) }

// do sends a command and fails the test if it fails.
func (f *fixture) do(t testing.TB, cmd string, kwargs, reply any) {
	t.Helper()
	if err := f.panel.Request(ctxT(t), f.name, cmd, kwargs, reply); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
}

func (f *fixture) state(t testing.TB) member.State {
	t.Helper()
	var s member.Status
	f.do(t, member.CmdStatus, nil, &s)
	return s.State
}

func (f *fixture) stats(t testing.TB) map[string]any {
	t.Helper()
	var s map[string]any
	f.do(t, member.CmdStats, nil, &s)
	return s
}

func newClient(t testing.TB, repo nameresolve.Repository, obsDim int, timeout time.Duration) *stream.RemoteInferenceClient {
	t.Helper()
	c, err := stream.NewRemoteInferenceClient(ctxT(t), stream.RemoteInferenceOptions{
		Repo: repo, Trial: testTrial, ObsDim: obsDim, Timeout: timeout,
	})
	if err != nil {
		t.Fatalf("new inference client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waiter sleeps until replies may have come, instead of spinning, as the
// worker loop does for an actor: on the client's ZeroMQ socket and on its
// shared-memory doorbell (a same-node policy worker replies there).
type waiter struct {
	c *stream.RemoteInferenceClient
}

func newWaiter(c *stream.RemoteInferenceClient) *waiter { return &waiter{c} }

// wait sleeps up to timeout, or not at all if replies are already there.
func (w *waiter) wait(timeout time.Duration) error {
	if !w.c.PrepareWait() {
		return nil
	}
	sock := w.c.Socket()
	// ZMQ_FD is edge-triggered: look at the events first (which rearms it).
	ev, err := sock.GetEvents()
	if err != nil || ev&zmq.POLLIN != 0 {
		return err
	}
	fd, err := sock.GetFd()
	if err != nil {
		return err
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for _, d := range w.c.WaitFds() {
		fds = append(fds, unix.PollFd{Fd: int32(d), Events: unix.POLLIN})
	}
	if _, err := unix.Poll(fds, int(timeout.Milliseconds())); err != nil && err != unix.EINTR {
		return err
	}
	return nil
}

// roundTrip posts obs, flushes and waits until every request is ready. It
// flushes again while waiting because a request posted before the
// connection to the worker is up stays queued in the client.
func roundTrip(t testing.TB, c *stream.RemoteInferenceClient, w *waiter, obs [][]float32) ([]stream.InferenceResult, []error) {
	t.Helper()
	ids := make([]stream.ReqID, len(obs))
	for i, o := range obs {
		id, err := c.Post(o)
		if err != nil {
			t.Fatalf("Post: %v", err)
		}
		ids[i] = id
	}
	ctx := ctxT(t)
	for pending := true; pending; {
		if err := c.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if err := c.Poll(); err != nil {
			t.Fatalf("Poll: %v", err)
		}
		pending = false
		for _, id := range ids {
			pending = pending || !c.Ready(id)
		}
		if !pending {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no replies within the deadline; client warning %q", c.Warning())
		}
		if err := w.wait(10 * time.Millisecond); err != nil {
			t.Fatalf("wait for replies: %v", err)
		}
	}
	res := make([]stream.InferenceResult, len(ids))
	errs := make([]error, len(ids))
	for i, id := range ids {
		res[i], errs[i] = c.Consume(id)
	}
	return res, errs
}

// mustRoundTrip is roundTrip for requests that must all succeed.
func mustRoundTrip(t testing.TB, c *stream.RemoteInferenceClient, w *waiter, obs [][]float32) []stream.InferenceResult {
	t.Helper()
	res, errs := roundTrip(t, c, w, obs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	return res
}

// acrossClients sends obs[i] from client i as one request each while the
// running worker is paused, so that its first poll after it starts again
// finds them all and answers them in one forward pass (should one arrive
// late, it gets a batch of its own), and returns each client's answer.
func (f *fixture) acrossClients(t *testing.T, obs [][]float32) []stream.InferenceResult {
	t.Helper()
	f.do(t, member.CmdPause, nil, nil)
	cs := make([]*stream.RemoteInferenceClient, len(obs))
	ids := make([]stream.ReqID, len(obs))
	for i := range cs {
		cs[i] = newClient(t, f.repo, len(obs[i]), 5*time.Second)
		id, err := cs[i].Post(obs[i])
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	// Flush until each request has left its client (the first flushes may
	// find the connection still coming up).
	ctx := ctxT(t)
	for i, c := range cs {
		for c.Stats().Messages == 0 {
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("client %d could not send: %s", i, c.Warning())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Sent is not yet received; give the loopback connections a moment to
	// deliver.
	time.Sleep(200 * time.Millisecond)
	f.do(t, member.CmdStart, nil, nil)

	res := make([]stream.InferenceResult, len(cs))
	for i, c := range cs {
		w := newWaiter(c)
		for !c.Ready(ids[i]) {
			if err := c.Poll(); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("client %d: no reply", i)
			}
			if err := w.wait(10 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		r, err := c.Consume(ids[i])
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		res[i] = r
	}
	return res
}

// cartPoleObs returns n plausible CartPole observations.
func cartPoleObs(seed uint64, n int) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	obs := make([][]float32, n)
	for i := range obs {
		obs[i] = []float32{
			float32(rng.NormFloat64()), float32(rng.NormFloat64()),
			float32(0.1 * rng.NormFloat64()), float32(rng.NormFloat64()),
		}
	}
	return obs
}

// localAnswers runs obs through a policy built here from cfg (and params,
// if not nil), as one batch.
func localAnswers(t testing.TB, cfg policy.Config, version int64, params []float32, obs [][]float32) api.Inference {
	t.Helper()
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if params != nil {
		if err := p.SetParams(version, params); err != nil {
			t.Fatal(err)
		}
	}
	batch := api.NewTensor[float32](len(obs), cfg.ObsDim)
	for i, o := range obs {
		copy(batch.Row(i), o)
	}
	var out api.Inference
	if err := p.Infer(batch, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// cartPoleConfig is the local counterpart of configuring a worker with
// {env: CartPole-v1, seed, deterministic: true}.
func cartPoleConfig(t testing.TB, seed int64) policy.Config {
	t.Helper()
	cfg, err := policy.ConfigForEnv(env.CartPoleName, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed, cfg.Deterministic = seed, true
	return cfg
}

// num reads a numeric stats figure, whatever integer or float type msgpack
// decoded it as.
func num(t testing.TB, stats map[string]any, key string) float64 {
	t.Helper()
	v := reflect.ValueOf(stats[key])
	if !v.IsValid() || v.Kind() == reflect.String || !v.CanConvert(reflect.TypeFor[float64]()) {
		t.Fatalf("stats[%q] = %v (%T), want a number", key, stats[key], stats[key])
	}
	return v.Convert(reflect.TypeFor[float64]()).Float()
}
