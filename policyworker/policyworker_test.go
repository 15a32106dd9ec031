package policyworker_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/vmihailenco/msgpack/v5"
)

// configure sends "configure" and fails the test on error.
func (f *fixture) configure(t *testing.T, cfg map[string]any) {
	t.Helper()
	f.do(t, member.CmdConfigure, cfg, nil)
}

// checkAnswers compares remote results with a local policy's answers for
// the same observations. Actions must be equal; log-probabilities and
// values may differ in the last bits because a batch is not guaranteed to
// be the same GEMM as the local one.
func checkAnswers(t *testing.T, got []stream.InferenceResult, want api.Inference) {
	t.Helper()
	for i, r := range got {
		if r.Action != want.Actions.Data[i] {
			t.Fatalf("row %d: action %d, local policy says %d", i, r.Action, want.Actions.Data[i])
		}
		if !near(r.LogProb, want.LogProbs.Data[i]) || !near(r.Value, want.Values.Data[i]) {
			t.Fatalf("row %d: log-prob %v value %v, local policy says %v %v",
				i, r.LogProb, r.Value, want.LogProbs.Data[i], want.Values.Data[i])
		}
		if r.Version != want.Version {
			t.Fatalf("row %d: version %d, want %d", i, r.Version, want.Version)
		}
	}
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5*(1+math.Abs(float64(b))) }

func TestServesLocalPolicyAnswers(t *testing.T) {
	f := newFixture(t)
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 3, "deterministic": true})
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 4, 5*time.Second)
	w := newWaiter(c)

	cfg := cartPoleConfig(t, 3)
	for round, n := range []int{1, 16, 3} {
		obs := cartPoleObs(uint64(round), n)
		checkAnswers(t, mustRoundTrip(t, c, w, obs), localAnswers(t, cfg, 0, nil, obs))
	}

	st := f.stats(t)
	if rows := num(t, st, "rows"); rows != 20 {
		t.Errorf("stats rows = %v, want 20", rows)
	}
	if b := num(t, st, "batches"); b != 3 {
		t.Errorf("stats batches = %v, want 3 (one per flush)", b)
	}
	if m := num(t, st, "max_batch_seen"); m != 16 {
		t.Errorf("stats max_batch_seen = %v, want 16", m)
	}
	for _, key := range []string{"infer_ms_p50", "rows_per_s", "mean_batch"} {
		if v := num(t, st, key); !(v > 0) {
			t.Errorf("stats %s = %v, want > 0", key, v)
		}
	}
	if v, m := num(t, st, "version"), num(t, st, "malformed"); v != 0 || m != 0 {
		t.Errorf("stats version %v malformed %v, want 0 and 0", v, m)
	}
}

func TestExplicitGaussianConfig(t *testing.T) {
	f := newFixture(t)
	f.configure(t, map[string]any{
		"obs_dim": 3, "action_dim": 2, "head": "gaussian", "hidden": []int{8}, "activation": "relu", "seed": 4,
	})
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 3, 5*time.Second)
	res := mustRoundTrip(t, c, newWaiter(c), [][]float32{{1, 2, 3}, {0, 0, 0}})
	for i, r := range res {
		if len(r.ContAction) != 2 || math.IsNaN(float64(r.LogProb)) {
			t.Errorf("row %d: continuous action %v log-prob %v, want 2 values and a finite log-prob", i, r.ContAction, r.LogProb)
		}
	}
	var p policyworker.Params
	f.do(t, policyworker.CmdGetParams, nil, &p)
	want, err := policy.New(policy.Config{ObsDim: 3, ActionDim: 2, Head: nn.Gaussian, Hidden: []int{8}, Activation: nn.ReLU, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Params.Data, want.Net().Params()) {
		t.Error("the worker's initial parameters differ from a local policy of the same config")
	}
}

func TestConfigureRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]any
	}{
		{"unknown key", map[string]any{"env": env.CartPoleName, "max_bach": 64}},
		{"unknown env", map[string]any{"env": "NoSuchEnv-v0"}},
		{"bad env config", map[string]any{"env": env.CartPoleName, "env_config": map[string]any{"max_episode_steps": -5}}},
		{"dims contradict env", map[string]any{"env": env.CartPoleName, "obs_dim": 5}},
		{"env_config without env", map[string]any{"obs_dim": 4, "action_dim": 2, "head": "categorical", "env_config": map[string]any{"a": 1}}},
		{"no dims", map[string]any{"seed": 1}},
		{"no kwargs", nil},
		{"unknown head", map[string]any{"obs_dim": 4, "action_dim": 2, "head": "beta"}},
		{"unknown activation", map[string]any{"env": env.CartPoleName, "activation": "gelu"}},
		{"negative max_batch", map[string]any{"env": env.CartPoleName, "max_batch": -1}},
		{"wrong type", map[string]any{"env": env.CartPoleName, "seed": "seven"}},
		{"unknown device", map[string]any{"env": env.CartPoleName, "device": "tpu:0"}},
		{"threads zero", map[string]any{"env": env.CartPoleName, "threads": 0}},
		{"threads not a count", map[string]any{"env": env.CartPoleName, "threads": "many"}},
		{"bad device number", map[string]any{"env": env.CartPoleName, "device": "cuda:x"}},
		// New has the CPU alone: the error says which binary has CUDA.
		{"cuda on a CPU binary", map[string]any{"env": env.CartPoleName, "device": "cuda:0"}},
		{"obs_shape contradicts env", map[string]any{"env": "minatar-breakout", "obs_shape": []int{10, 10, 3}}},
		{"conv without an image", map[string]any{"env": env.CartPoleName, "conv": []map[string]any{{"filters": 4, "kernel": 3, "stride": 1}}}},
		{"conv larger than the image", map[string]any{"env": "minatar-breakout", "conv": []map[string]any{{"filters": 4, "kernel": 11, "stride": 1}}}},
	}
	f := newFixture(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.panel.Request(ctxT(t), f.name, member.CmdConfigure, tt.cfg, nil)
			if !errors.Is(err, rpc.ErrBadArguments) {
				t.Errorf("configure: got %v, want bad_arguments", err)
			}
			if s := f.state(t); s != member.StateReady {
				t.Errorf("state %s after a rejected configure, want %s", s, member.StateReady)
			}
		})
	}
}

// TestCheckConfigConv: the configure-time check accepts the MinAtar
// network, from env or from explicit dimensions, and refuses a bad
// convolution with an error that names the key.
func TestCheckConfigConv(t *testing.T) {
	conv := func(filters, kernel, stride int) []map[string]any {
		return []map[string]any{{"filters": filters, "kernel": kernel, "stride": stride}}
	}
	minatar := map[string]any{"env": "minatar-breakout", "conv": conv(16, 3, 1), "hidden": []int{128}, "activation": "relu", "shared_trunk": true}
	explicit := map[string]any{"obs_dim": 400, "obs_shape": []int{10, 10, 4}, "action_dim": 6, "head": "categorical", "conv": conv(16, 3, 1)}
	same := map[string]any{"env": "minatar-breakout", "obs_shape": []int{10, 10, 4}, "conv": conv(16, 3, 1)}
	args := func(kwargs map[string]any) rpc.Args {
		raw, err := msgpack.Marshal(kwargs)
		if err != nil {
			t.Fatal(err)
		}
		return rpc.RawArgs(raw)
	}
	for _, ok := range []map[string]any{minatar, explicit, same} {
		if err := policyworker.CheckConfig(args(ok), 0); err != nil {
			t.Errorf("CheckConfig(%v) = %v", ok, err)
		}
	}
	for _, bad := range []map[string]any{
		{"env": "minatar-breakout", "conv": conv(0, 3, 1)},
		{"env": "minatar-breakout", "conv": conv(16, 3, 0)},
		{"obs_dim": 400, "action_dim": 6, "head": "categorical", "conv": conv(16, 3, 1)}, // no obs_shape
	} {
		err := policyworker.CheckConfig(args(bad), 0)
		if !errors.Is(err, rpc.ErrBadArguments) || !strings.Contains(err.Error(), "conv") {
			t.Errorf("CheckConfig(%v) = %v, want bad_arguments naming conv", bad, err)
		}
	}
}

func TestReconfigure(t *testing.T) {
	f := newFixture(t)
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 1, "deterministic": true})
	f.do(t, policyworker.CmdLoadParams, policyworker.LoadParamsArgs{
		Version: 9, Params: flat(make([]float32, numParams(t, cartPoleConfig(t, 1)))),
	}, nil)
	// A rejected reconfigure keeps the running configuration...
	if err := f.panel.Request(ctxT(t), f.name, member.CmdConfigure, map[string]any{"env": "nope"}, nil); err == nil {
		t.Fatal("bad reconfigure accepted")
	}
	// ... and a good one starts over: new seed, version 0, new endpoint.
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 2, "deterministic": true, "max_batch": 64})
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 4, 5*time.Second)
	obs := cartPoleObs(7, 8)
	checkAnswers(t, mustRoundTrip(t, c, newWaiter(c), obs), localAnswers(t, cartPoleConfig(t, 2), 0, nil, obs))
}

func numParams(t *testing.T, cfg policy.Config) int {
	t.Helper()
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.NumParams()
}

func flat(p []float32) api.Tensor[float32] { return api.Tensor[float32]{Shape: []int{len(p)}, Data: p} }

func TestLoadAndGetParams(t *testing.T) {
	f := newFixture(t)
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 3, "deterministic": true})
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 4, 5*time.Second)
	w := newWaiter(c)

	cfg := cartPoleConfig(t, 3)
	n := numParams(t, cfg)
	params := make([]float32, n)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range params {
		params[i] = float32(0.3 * rng.NormFloat64())
	}
	var loaded policyworker.LoadParamsReply
	f.do(t, policyworker.CmdLoadParams, policyworker.LoadParamsArgs{Version: 7, Params: flat(params)}, &loaded)
	if loaded.Version != 7 || loaded.NumParams != n {
		t.Errorf("load_params reply %+v, want version 7 and %d params", loaded, n)
	}
	var got policyworker.Params
	f.do(t, policyworker.CmdGetParams, nil, &got)
	if got.Version != 7 || !slices.Equal(got.Params.Shape, []int{n}) || !slices.Equal(got.Params.Data, params) {
		t.Fatalf("get_params: version %d shape %v, want version 7 and the loaded vector", got.Version, got.Params.Shape)
	}
	obs := cartPoleObs(4, 12)
	checkAnswers(t, mustRoundTrip(t, c, w, obs), localAnswers(t, cfg, 7, params, obs))

	bad := []struct {
		name   string
		params api.Tensor[float32]
	}{
		{"too short", flat(params[:n-1])},
		{"too long", flat(append(slices.Clone(params), 1))},
		{"absent", api.Tensor[float32]{}},
		{"not flat", api.Tensor[float32]{Shape: []int{1, n}, Data: params}},
		{"NaN", flat(append([]float32{float32(math.NaN())}, params[1:]...))},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := f.panel.Request(ctxT(t), f.name, policyworker.CmdLoadParams,
				policyworker.LoadParamsArgs{Version: 8, Params: tt.params}, nil)
			if !errors.Is(err, rpc.ErrBadArguments) {
				t.Fatalf("load_params: got %v, want bad_arguments", err)
			}
			if s := f.state(t); s != member.StateRunning {
				t.Fatalf("state %s after a rejected load_params, want %s", s, member.StateRunning)
			}
			var still policyworker.Params
			f.do(t, policyworker.CmdGetParams, nil, &still)
			if still.Version != 7 || !slices.Equal(still.Params.Data, params) {
				t.Fatalf("a rejected load_params changed the parameters (version %d)", still.Version)
			}
		})
	}
	if v := num(t, f.stats(t), "version"); v != 7 {
		t.Errorf("stats version = %v, want 7", v)
	}
}

func TestParamsCommandsNeedConfigure(t *testing.T) {
	f := newFixture(t)
	for _, cmd := range []string{policyworker.CmdGetParams, policyworker.CmdLoadParams} {
		err := f.panel.Request(ctxT(t), f.name, cmd, policyworker.LoadParamsArgs{Params: flat([]float32{1})}, nil)
		var re *rpc.Error
		if !errors.As(err, &re) || re.Type != worker.ErrTypeBadState {
			t.Errorf("%s before configure: got %v, want %s", cmd, err, worker.ErrTypeBadState)
		}
	}
	if s := f.state(t); s != member.StateReady {
		t.Errorf("state %s, want %s", s, member.StateReady)
	}
}

// TestBatchesAcrossClients queues one request from each of four clients
// while the worker is paused, so that its first poll after start finds all
// of them and answers them with one forward pass.
func TestBatchesAcrossClients(t *testing.T) {
	f := newFixture(t)
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 5, "deterministic": true})
	f.do(t, member.CmdStart, nil, nil)

	obs := cartPoleObs(9, 4)
	got := f.acrossClients(t, obs)
	want := localAnswers(t, cartPoleConfig(t, 5), 0, nil, obs)
	for i, r := range got {
		if r.Action != want.Actions.Data[i] || !near(r.Value, want.Values.Data[i]) {
			t.Errorf("client %d got action %d value %v, want %d %v (another client's answer?)",
				i, r.Action, r.Value, want.Actions.Data[i], want.Values.Data[i])
		}
	}
	st := f.stats(t)
	if mb := num(t, st, "mean_batch"); mb <= 1 {
		t.Errorf("mean_batch = %v over %v batches, want > 1: requests of different clients were not batched",
			mb, num(t, st, "batches"))
	}
	t.Logf("batches %v, max_batch_seen %v", num(t, st, "batches"), num(t, st, "max_batch_seen"))
}

// TestBadObservationDoesNotStopWorker sends a NaN observation: its batch
// cannot be answered and times out on the client, but the worker keeps
// serving, says what happened in its status, and recovers.
func TestBadObservationDoesNotStopWorker(t *testing.T) {
	f := newFixture(t)
	f.configure(t, map[string]any{"env": env.CartPoleName})
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 4, 300*time.Millisecond)
	w := newWaiter(c)

	nan := float32(math.NaN())
	_, errs := roundTrip(t, c, w, [][]float32{{0, nan, 0, 0}})
	if !errors.Is(errs[0], stream.ErrInferenceFailed) {
		t.Fatalf("NaN observation: got %v, want ErrInferenceFailed", errs[0])
	}
	var s member.Status
	f.do(t, member.CmdStatus, nil, &s)
	if s.State != member.StateRunning || !strings.Contains(s.Warning, "dropped") {
		t.Fatalf("status %s, warning %q; want RUNNING with a warning about the dropped batch", s.State, s.Warning)
	}
	if e := num(t, f.stats(t), "infer_errors"); e != 1 {
		t.Errorf("infer_errors = %v, want 1", e)
	}
	// Served batches clear the warning once it has been clear for the
	// fixture's ConditionHold.
	mustRoundTrip(t, c, w, cartPoleObs(1, 2))
	eventually.True(t, 5*time.Second, "the warning clears after a served batch", func() bool {
		var after member.Status // fresh: an empty warning is omitted on the wire
		f.do(t, member.CmdStatus, nil, &after)
		return after.Warning == ""
	})
}

// TestIdleWorkerAnswers: a worker given an idle tick (30 s) far
// longer than the client's timeout (5 s) still answers every request that
// reaches it after it went idle. Its loop polls every RUNNING worker at
// least once per worker.DefaultIdleWait (100 ms) whatever the tick, so
// this does not tell the socket's wake-up from that sweep, and it times
// nothing: worker.TestFdWaiter tells them apart.
func TestIdleWorkerAnswers(t *testing.T) {
	f := startWorker(t, workertest.Repo(t), 0, 30*time.Second, testLogger(t))
	f.configure(t, map[string]any{"env": env.CartPoleName})
	f.do(t, member.CmdStart, nil, nil)
	c := newClient(t, f.repo, 4, 5*time.Second)
	w := newWaiter(c)
	mustRoundTrip(t, c, w, cartPoleObs(1, 1)) // connects and warms up
	for range 3 {
		time.Sleep(50 * time.Millisecond) // let the worker go idle
		mustRoundTrip(t, c, w, cartPoleObs(2, 1))
	}
}
