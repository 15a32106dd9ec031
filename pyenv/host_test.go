package pyenv_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/pytest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/pyenv"
)

func config(t *testing.T, module, factory string) pyenv.Config {
	t.Helper()
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return pyenv.Config{
		Python: pytest.Python(t), Module: module, Factory: factory, Path: []string{testdata},
		StartTimeout: 30 * time.Second, StepTimeout: 10 * time.Second,
	}
}

func start(t *testing.T, cfg pyenv.Config, n int) *pyenv.Host {
	t.Helper()
	h, err := pyenv.Start(context.Background(), cfg, n, workertest.Logger(t, slog.LevelInfo))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// TestCartPoleMatchesGo steps the Python CartPole of the examples through
// the bridge and the built-in Go CartPole with the same seeds and actions:
// every observation, reward and flag must be equal, bit for bit, over
// several episodes of three environments stepped as one batch.
func TestCartPoleMatchesGo(t *testing.T) {
	const n = 3
	h := start(t, config(t, "distrl.examples.cartpole", "make_env"), n)
	if got, want := h.ObservationSpace(), mustGoCartPole(t).ObservationSpace(); !spaceEqual(got, want) {
		t.Errorf("observation space %+v, want %+v", got, want)
	}
	if got := h.ActionSpace(); got.Kind != api.Discrete || got.N != 2 {
		t.Errorf("action space %+v, want Discrete(2)", got)
	}
	goEnvs := make([]*env.CartPole, n)
	for i := range goEnvs {
		goEnvs[i] = mustGoCartPole(t)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	episodes := make([]int, n)
	resets := make([]api.EnvReset, 0, n)
	for i := range n {
		resets = append(resets, api.EnvReset{Env: i, Seed: int64(1000 + i)})
	}
	ctx := context.Background()
	var steps, finished int
	for finished < 12 {
		// Reset what ended (all at first), then step everything live: a
		// batch mixes resets and steps as the actor's does.
		var stepping []api.EnvStep
		live := map[int]bool{}
		for i := range n {
			live[i] = true
		}
		for _, r := range resets {
			live[r.Env] = false
		}
		for i := range n {
			if live[i] {
				stepping = append(stepping, api.EnvStep{Env: i, Actions: []api.Action{{Discrete: rng.Int32N(2)}}})
			}
		}
		if err := h.Run(ctx, resets, stepping); err != nil {
			t.Fatalf("Run: %v", err)
		}
		for _, r := range resets {
			want, err := goEnvs[r.Env].Reset(r.Seed)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Obs[0], want[0]) {
				t.Fatalf("env %d reset(%d): %v, Go %v", r.Env, r.Seed, r.Obs[0], want[0])
			}
		}
		resets = resets[:0]
		for _, s := range stepping {
			want, err := goEnvs[s.Env].Step(s.Actions)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Result
			if !slices.Equal(got.Obs[0], want.Obs[0]) || got.Rewards[0] != want.Rewards[0] ||
				got.Terminated[0] != want.Terminated[0] || got.Truncated[0] != want.Truncated[0] {
				t.Fatalf("env %d step %d: %+v, Go %+v", s.Env, steps, got, want)
			}
			steps++
			if got.Done() {
				finished++
				episodes[s.Env]++
				resets = append(resets, api.EnvReset{Env: s.Env, Seed: int64(1000 + s.Env + 100*episodes[s.Env])})
			}
		}
	}
	if _, ok := h.InfoMeans()["x"]; !ok {
		t.Errorf("info means %v lack the example's numeric key x", h.InfoMeans())
	}
	t.Logf("%d steps, %d episodes identical", steps, finished)
}

func mustGoCartPole(t *testing.T) *env.CartPole {
	t.Helper()
	c, err := env.NewCartPole(env.CartPoleMaxSteps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func spaceEqual(a, b api.Space) bool {
	return a.Kind == b.Kind && a.N == b.N && slices.Equal(a.Shape, b.Shape) && slices.Equal(a.Low, b.Low) && slices.Equal(a.High, b.High)
}

// TestMultiDiscreteObservationsBoxActions covers the other space kinds:
// a MultiDiscrete observation is a vector of its integers, and Box actions
// arrive as float arrays; numeric info keys are averaged.
func TestMultiDiscreteObservationsBoxActions(t *testing.T) {
	h := start(t, config(t, "badenvs", "multidiscrete_observations"), 2)
	if obs := h.ObservationSpace(); obs.Kind != api.Box || !slices.Equal(obs.High, []float32{3, 4, 5}) {
		t.Errorf("observation space %+v, want Box of high [3 4 5]", obs)
	}
	ctx := context.Background()
	resets := []api.EnvReset{{Env: 0, Seed: 1}, {Env: 1, Seed: 2}}
	if err := h.Run(ctx, resets, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resets[1].Obs[0], []float32{1, 2, 3}) {
		t.Errorf("reset obs %v", resets[1].Obs)
	}
	steps := []api.EnvStep{
		{Env: 0, Actions: []api.Action{{Continuous: []float32{0.5, 0.25}}}},
		{Env: 1, Actions: []api.Action{{Continuous: []float32{-1, 1}}}},
	}
	if err := h.Run(ctx, nil, steps); err != nil {
		t.Fatal(err)
	}
	if r := steps[0].Result; r.Rewards[0] != 0.75 || !slices.Equal(r.Obs[0], []float32{1, 0, 5}) {
		t.Errorf("step result %+v", r)
	}
	if m := h.InfoMeans()["norm"]; m != (0.3125+2)/2 {
		t.Errorf("info mean of norm %v, want %v", m, (0.3125+2)/2)
	}
	// A Box action beyond the bounds is clipped (a Gaussian policy's
	// samples are unbounded); NaN or the wrong width is refused.
	clipped := []api.EnvStep{{Env: 0, Actions: []api.Action{{Continuous: []float32{2, -0.5}}}}}
	if err := h.Run(ctx, nil, clipped); err != nil {
		t.Fatal(err)
	}
	if r := clipped[0].Result.Rewards[0]; r != 0.5 {
		t.Errorf("reward %v for action (2, -0.5) in Box(-1, 1): want 0.5, the clipped action's sum", r)
	}
	for _, bad := range [][]float32{{float32(math.NaN()), 0}, {0.5}} {
		err := h.Run(ctx, nil, []api.EnvStep{{Env: 0, Actions: []api.Action{{Continuous: bad}}}})
		if !errors.Is(err, api.ErrInvalidAction) {
			t.Errorf("action %v: %v, want ErrInvalidAction", bad, err)
		}
	}
}

// TestFailures: every way a Python environment can fail gives a clear
// error naming the cause, and leaves no process behind.
func TestFailures(t *testing.T) {
	tests := []struct {
		name, module, factory string
		stepTimeout           time.Duration
		atStart               bool
		is                    error
		want                  string // in the message
	}{
		{name: "module not found", module: "no_such_module", atStart: true, want: "No module named 'no_such_module'"},
		{name: "module import fails", module: "broken_import", atStart: true, want: "No module named 'a_module_that_does_not_exist'"},
		{name: "no factory", module: "badenvs", factory: "nope", atStart: true, want: "module badenvs has no callable nope"},
		{name: "factory not callable", module: "badenvs", factory: "not_callable", atStart: true, want: "no callable not_callable"},
		{name: "factory raises", module: "badenvs", factory: "factory_raises", atStart: true, want: "RuntimeError: no licence"},
		{name: "unsupported action space", module: "badenvs", factory: "multidiscrete_actions", atStart: true,
			is: pyenv.ErrUnsupportedSpace, want: "action space MultiDiscrete"},
		{name: "unsupported observation space", module: "badenvs", factory: "dict_observations", atStart: true,
			is: pyenv.ErrUnsupportedSpace, want: "observation space Dict"},
		{name: "step raises", module: "badenvs", factory: "raise_at_step", want: "ValueError: the pole broke at step 3"},
		{name: "process dies", module: "badenvs", factory: "die_at_step", is: pyenv.ErrExited, want: "exit status 3"},
		{name: "step hangs", module: "badenvs", factory: "hang_at_step", stepTimeout: 500 * time.Millisecond, is: pyenv.ErrTimeout},
		{name: "acting names nobody", module: "badenvs", factory: "acting_nobody", want: "acting() named no agent"},
		{name: "acting names a stranger", module: "badenvs", factory: "acting_stranger", want: "not in possible_agents: ['player_7']"},
		{name: "action mask too short", module: "badenvs", factory: "mask_too_short", atStart: true,
			is: pyenv.ErrUnsupportedSpace, want: "2 indices for an action space of 3 actions"},
		{name: "action mask out of range", module: "badenvs", factory: "mask_out_of_range", atStart: true,
			is: pyenv.ErrUnsupportedSpace, want: "action 2's index 99 is outside the observation's 10 values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config(t, tt.module, cmpOr(tt.factory, "make_env"))
			if tt.stepTimeout > 0 {
				cfg.StepTimeout = tt.stepTimeout
			}
			h, err := pyenv.Start(context.Background(), cfg, 2, workertest.Logger(t, slog.LevelInfo))
			var pid int
			if err == nil {
				pid = h.Pid()
				err = stepUntilError(h)
				if cerr := h.Close(); cerr != nil && tt.is == nil {
					t.Logf("close: %v", cerr)
				}
			}
			if tt.atStart != (pid == 0) {
				t.Errorf("failed at start: %v, want %v (err %v)", pid == 0, tt.atStart, err)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v, want one wrapping %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if pid != 0 && alive(pid) {
				t.Errorf("host process %d still alive after Close", pid)
			}
		})
	}
}

// TestTurns plays the Nim of the examples, whose players take turns,
// through the bridge: after a reset and after every step of a live game
// only the player to move acts, the winner of the last stone gets +1 and
// the loser -1 on that step, and an ended game names every agent. Two
// games side by side, one reset while the other is stepped.
func TestTurns(t *testing.T) {
	h := start(t, config(t, "distrl.examples.nim", "make_env"), 2)
	if got := h.Agents(); !slices.Equal(got, []string{"player_0", "player_1"}) {
		t.Fatalf("agents %v", got)
	}
	// The three takes' flags follow the pile's 11 values and the turn flag.
	if got := h.ActionMask(); !slices.Equal(got, []int{12, 13, 14}) {
		t.Errorf("action mask %v, want [12 13 14]", got)
	}
	ctx := context.Background()
	resets := []api.EnvReset{{Env: 0, Seed: 1}, {Env: 1, Seed: 2}}
	if err := h.Run(ctx, resets, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range resets {
		if !slices.Equal(r.Acting, []bool{true, false}) {
			t.Fatalf("env %d after reset: acting %v, want player_0 alone", r.Env, r.Acting)
		}
	}
	// Env 0 takes 3, 3, 3, 1 of 10 stones: player_1 takes the last.
	// Env 1 takes 2 and is then reset while env 0 goes on.
	takes := []int32{3, 3, 3, 1}
	for i, take := range takes {
		mover := i % 2
		actions := make([]api.Action, 2)
		actions[mover] = api.Action{Discrete: take - 1}
		actions[1-mover] = api.Action{Discrete: 2} // not the mover's: ignored
		steps := []api.EnvStep{{Env: 0, Actions: actions}}
		var resets []api.EnvReset
		switch i {
		case 0:
			steps = append(steps, api.EnvStep{Env: 1, Actions: []api.Action{{Discrete: 1}, {Discrete: 0}}})
		case 1:
			resets = []api.EnvReset{{Env: 1, Seed: 3}}
		}
		if err := h.Run(ctx, resets, steps); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
		s := steps[0].Result
		last := i == len(takes)-1
		if s.Done() != last {
			t.Fatalf("take %d: done %v", i, s.Done())
		}
		want := []float32{0, 0}
		if last {
			want[mover], want[1-mover] = 1, -1
		}
		if !slices.Equal(s.Rewards, want) {
			t.Errorf("take %d: rewards %v, want %v", i, s.Rewards, want)
		}
		wantActing := []bool{mover == 1, mover == 0}
		if last {
			wantActing = []bool{true, true}
		}
		if !slices.Equal(s.Acting, wantActing) {
			t.Errorf("take %d: acting %v, want %v", i, s.Acting, wantActing)
		}
		if i == 0 && !slices.Equal(steps[1].Result.Acting, []bool{false, true}) {
			t.Errorf("env 1 after its first move: acting %v, want player_1", steps[1].Result.Acting)
		}
		if i == 1 && !slices.Equal(resets[0].Acting, []bool{true, false}) {
			t.Errorf("env 1 reset beside a step: acting %v, want player_0", resets[0].Acting)
		}
	}
	// A game without turns reports none: nil, every agent.
	c := start(t, config(t, "distrl.examples.spread", "make_env"), 1)
	r := []api.EnvReset{{Env: 0, Seed: 1}}
	if err := c.Run(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	if r[0].Acting != nil {
		t.Errorf("spread after reset: acting %v, want nil", r[0].Acting)
	}
	if m := c.ActionMask(); m != nil {
		t.Errorf("spread's action mask %v, want none", m)
	}
	// A policy built for Nim leaves out the takes its observation rules out.
	if err := env.Register(); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, "distrl.examples.nim", "make_env")
	pc, err := policy.ConfigForEnv(pyenv.Name, map[string]any{"python": cfg.Python, "module": cfg.Module})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pc.ActionMask, []int{12, 13, 14}) {
		t.Errorf("policy for Nim: action mask %v, want [12 13 14]", pc.ActionMask)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// stepUntilError resets both environments and steps them until an error,
// giving up after 20 steps.
func stepUntilError(h *pyenv.Host) error {
	ctx := context.Background()
	if err := h.Run(ctx, []api.EnvReset{{Env: 0, Seed: 1}, {Env: 1, Seed: 2}}, nil); err != nil {
		return err
	}
	for range 20 {
		steps := []api.EnvStep{{Env: 0, Actions: []api.Action{{Discrete: 1}}}, {Env: 1, Actions: []api.Action{{Discrete: 0}}}}
		if err := h.Run(ctx, nil, steps); err != nil {
			return err
		}
	}
	return nil
}

// alive reports whether pid names a process that is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestLongTempDir: where the temporary directory is too deep for an ipc://
// socket path, the host is reached over the loopback instead.
func TestLongTempDir(t *testing.T) {
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", deep)
	h := start(t, config(t, "distrl.examples.cartpole", "make_env"), 1)
	if err := h.Run(context.Background(), []api.EnvReset{{Env: 0, Seed: 1}}, nil); err != nil {
		t.Fatal(err)
	}
}
