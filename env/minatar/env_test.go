package minatar

import (
	"bytes"
	"errors"
	"image/png"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/stattest"
)

// newEnv returns a game with the options, reset with seed 1.
func newEnv(t testing.TB, name string, opts Options) *Env {
	t.Helper()
	e, err := New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reset(1); err != nil {
		t.Fatal(err)
	}
	return e
}

// exact returns a game without sticky actions, so a scenario's actions are
// the ones executed, reset with seed 1.
func exact(t testing.TB, name string) *Env {
	o := DefaultOptions()
	o.Sticky = 0
	return newEnv(t, name, o)
}

// step takes one action and returns the reward and whether the episode
// terminated.
func step(t testing.TB, e *Env, a int32) (int, bool) {
	t.Helper()
	s, err := e.Step([]api.Action{{Discrete: a}})
	if err != nil {
		t.Fatal(err)
	}
	return int(s.Rewards[0]), s.Terminated[0]
}

// cell reports whether channel ch of the observation is set at (row, col).
func cell(e *Env, row, col, ch int) bool {
	return e.obs[(row*Size+col)*len(e.spec.channels)+ch] != 0
}

func TestChannels(t *testing.T) {
	want := map[string][]string{
		"asterix":        {"player", "enemy", "trail", "gold"},
		"breakout":       {"paddle", "ball", "trail", "brick"},
		"freeway":        {"chicken", "car", "speed1", "speed2", "speed3", "speed4", "speed5"},
		"seaquest":       {"sub_front", "sub_back", "friendly_bullet", "trail", "enemy_bullet", "enemy_fish", "enemy_sub", "oxygen_gauge", "diver_gauge", "diver"},
		"space_invaders": {"cannon", "alien", "alien_left", "alien_right", "friendly_bullet", "enemy_bullet"},
	}
	minimal := map[string]string{"asterix": "nlurd", "breakout": "nlr", "freeway": "nud", "seaquest": "nlurdf", "space_invaders": "nlrf"}
	if got := Games(); !slices.Equal(got, []string{"asterix", "breakout", "freeway", "seaquest", "space_invaders"}) {
		t.Fatalf("Games() = %v", got)
	}
	for _, name := range Games() {
		t.Run(name, func(t *testing.T) {
			ch, err := Channels(name)
			if err != nil || !slices.Equal(ch, want[name]) {
				t.Errorf("Channels = %v, %v, want %v", ch, err, want[name])
			}
			if len(ch) != len(specGlyphs(name)) {
				t.Errorf("%d channels, %d glyphs", len(ch), len(specGlyphs(name)))
			}
			full := newEnv(t, name, DefaultOptions())
			if got := strings.Join(full.ActionNames(), ""); got != "nlurdf" {
				t.Errorf("full action set %q", got)
			}
			o := DefaultOptions()
			o.MinimalActions = true
			m := newEnv(t, name, o)
			if got := strings.Join(m.ActionNames(), ""); got != minimal[name] || m.ActionSpace().N != len(got) {
				t.Errorf("minimal action set %q (space %+v), want %q", got, m.ActionSpace(), minimal[name])
			}
		})
	}
	if _, err := Channels("pong"); err == nil {
		t.Error("Channels(pong) succeeded")
	}
}

func specGlyphs(name string) string {
	s, _ := lookup(name)
	return s.glyphs
}

// TestObservations plays random episodes of every game and checks every
// observation: shape [10, 10, C], values 0 or 1, inside the space, and a
// player drawn.
func TestObservations(t *testing.T) {
	for _, name := range Games() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, name, DefaultOptions())
			space := e.ObservationSpace()
			c := len(e.spec.channels)
			if err := space.Validate(); err != nil || !slices.Equal(space.Shape, []int{Size, Size, c}) {
				t.Fatalf("space %+v: %v", space.Shape, err)
			}
			if as := e.ActionSpace(); as.Kind != api.Discrete || as.N != 6 {
				t.Fatalf("action space %+v", as)
			}
			check := func(obs []float32) {
				t.Helper()
				if len(obs) != space.Size() || !space.Contains(obs) {
					t.Fatalf("observation of %d values outside the space", len(obs))
				}
				player := false
				for i, v := range obs {
					if v != 0 && v != 1 {
						t.Fatalf("value %v at %d", v, i)
					}
					player = player || (i%c == 0 && v == 1)
				}
				if !player {
					t.Fatalf("no player (channel 0) in\n%s", e.Render())
				}
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for ep := range 20 {
				obs, err := e.Reset(int64(ep))
				if err != nil || len(obs) != 1 {
					t.Fatal(obs, err)
				}
				check(obs[0])
				for {
					s, err := e.Step([]api.Action{{Discrete: int32(rng.IntN(6))}})
					if err != nil {
						t.Fatal(err)
					}
					if s.Terminated[0] {
						break // a terminal frame may show the player's loss
					}
					check(s.Obs[0])
				}
			}
		})
	}
}

// play runs steps random actions from a seeded policy, resetting with
// consecutive seeds, and returns a digest (FNV-1a) of every observation and
// reward.
func play(t testing.TB, e *Env, policySeed uint64, steps int) uint64 {
	rng := rand.New(rand.NewPCG(policySeed, 0))
	h := uint64(14695981039346656037)
	mix := func(vs []float32) {
		for _, v := range vs {
			h = (h ^ uint64(math.Float32bits(v))) * 1099511628211
		}
	}
	seed := int64(0)
	o, _ := e.Reset(seed)
	mix(o[0])
	for range steps {
		s, err := e.Step([]api.Action{{Discrete: int32(rng.IntN(e.ActionSpace().N))}})
		if err != nil {
			t.Fatal(err)
		}
		mix(s.Obs[0])
		mix(s.Rewards)
		if s.Done() {
			seed++
			o, _ = e.Reset(seed)
			mix(o[0])
		}
	}
	return h
}

func TestDeterminism(t *testing.T) {
	for _, name := range Games() {
		t.Run(name, func(t *testing.T) {
			const steps = 5000
			h1 := play(t, newEnv(t, name, DefaultOptions()), 7, steps)
			if h2 := play(t, newEnv(t, name, DefaultOptions()), 7, steps); h1 != h2 {
				t.Fatal("same seeds and actions gave different trajectories")
			}
			// A fresh Env and a used one agree too: Reset forgets
			// everything but the previous action, which sticky actions
			// carry into the next episode (as MinAtar's do).
			used := newEnv(t, name, DefaultOptions())
			play(t, used, 8, 500)
			used.last = 0
			if h3 := play(t, used, 7, steps); h1 != h3 {
				t.Fatal("a reused Env diverged from a fresh one")
			}
			if h4 := play(t, newEnv(t, name, DefaultOptions()), 9, steps); h1 == h4 {
				t.Fatal("different action sequences gave the same trajectory")
			}
		})
	}
}

// TestStickyAcrossEpisodes: the previous action survives Reset, as
// MinAtar's last_action does, so a sticky first step repeats the last
// action of the episode before.
func TestStickyAcrossEpisodes(t *testing.T) {
	e := exact(t, "breakout")
	step(t, e, Right)
	e.opts.Sticky = 1 // every step repeats the previous action
	if _, err := e.Reset(2); err != nil {
		t.Fatal(err)
	}
	step(t, e, Noop)
	if g := e.game.(*breakout); g.paddle != paddleStart+1 {
		t.Errorf("paddle at %d after a sticky first step, want %d: the previous episode's Right repeated", g.paddle, paddleStart+1)
	}
}

// TestStickyFrequency checks that an action is replaced by the previous one
// with the configured probability: the policy always chooses an action
// other than the one executed last, so a repeat is a sticky step.
func TestStickyFrequency(t *testing.T) {
	for _, p := range []float64{0, 0.1, 0.25, 1} {
		o := DefaultOptions()
		o.Sticky = p
		e := newEnv(t, "space_invaders", o)
		rng := rand.New(rand.NewPCG(11, 12))
		const n = 20000
		stuck := 0
		seed := int64(0)
		for range n {
			prev := e.last
			a := (prev + 1 + int32(rng.IntN(5))) % NumActions
			s, err := e.Step([]api.Action{{Discrete: a}})
			if err != nil {
				t.Fatal(err)
			}
			switch e.last {
			case prev:
				stuck++
			case a:
			default:
				t.Fatalf("executed %d, chose %d, previous %d", e.last, a, prev)
			}
			if s.Done() {
				seed++
				prevEpisode := e.last
				e.Reset(seed)
				if e.last != prevEpisode {
					t.Fatalf("Reset changed the previous action from %d to %d; it carries over", prevEpisode, e.last)
				}
			}
		}
		switch p {
		case 0, 1:
			if stuck != int(p*n) {
				t.Errorf("sticky %v: %d of %d steps repeated", p, stuck, n)
			}
		default:
			stat, dof, pv, err := stattest.ChiSquare([]int{stuck, n - stuck}, []float64{p, 1 - p})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("sticky %v: %d of %d steps repeated (%.4f), chi2 %.2f dof %d p %.3f", p, stuck, n, float64(stuck)/n, stat, dof, pv)
			if pv < 0.001 {
				t.Errorf("sticky %v: %d of %d repeats is implausible (p = %.2g)", p, stuck, n, pv)
			}
		}
	}
}

// randomWalk steps an Env with uniformly random actions from the full set
// and starts a new episode whenever one ends.
type randomWalk struct {
	tb      testing.TB
	e       *Env
	rng     *rand.Rand
	actions []api.Action
	episode int64
	// newEpisode starts episode n (seeded n) once the last one ended:
	// Reset, unless a test swaps in something else.
	newEpisode func(n int64)
}

func newRandomWalk(tb testing.TB, e *Env, seed uint64) *randomWalk {
	w := &randomWalk{tb: tb, e: e, rng: rand.New(rand.NewPCG(seed, seed)), actions: make([]api.Action, 1)}
	w.newEpisode = func(n int64) {
		if _, err := e.Reset(n); err != nil {
			tb.Fatal(err)
		}
	}
	return w
}

// step takes one step, and starts the next episode if it ended one.
func (w *randomWalk) step() {
	w.actions[0].Discrete = int32(w.rng.IntN(int(NumActions)))
	s, err := w.e.Step(w.actions)
	if err != nil {
		w.tb.Fatal(err)
	}
	if s.Done() {
		w.episode++
		w.newEpisode(w.episode)
	}
}

func TestStepAllocFree(t *testing.T) {
	for _, name := range Games() {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, name, DefaultOptions())
			w := newRandomWalk(t, e, 1)
			// Warm up the object lists to their working size first.
			for range 2000 {
				w.step()
			}
			// A Reset allocates its returned observation: start the next
			// episode the way Reset does, without it.
			w.newEpisode = func(n int64) {
				e.pcg.Seed(uint64(n), pcgStream)
				e.game.reset(e.rng)
				e.live = true
			}
			if got := testing.AllocsPerRun(5000, w.step); got != 0 {
				t.Errorf("Step allocates %v times", got)
			}
		})
	}
}

func TestStepErrors(t *testing.T) {
	e, err := New("breakout", DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Step([]api.Action{{}}); !errors.Is(err, api.ErrNeedsReset) {
		t.Errorf("Step before Reset: %v", err)
	}
	o := DefaultOptions()
	o.MinimalActions = true
	e = newEnv(t, "breakout", o)
	for _, actions := range [][]api.Action{nil, {{Discrete: 3}}, {{Discrete: -1}}, {{}, {}}} {
		if _, err := e.Step(actions); !errors.Is(err, api.ErrInvalidAction) {
			t.Errorf("Step(%v) = %v, want ErrInvalidAction", actions, err)
		}
	}
	// Lose the ball: the episode ends and Step refuses until Reset.
	for {
		if _, term := step(t, e, 0); term {
			break
		}
	}
	if _, err := e.Step([]api.Action{{}}); !errors.Is(err, api.ErrNeedsReset) {
		t.Errorf("Step after the end: %v", err)
	}
	if got := e.Agents(); !slices.Equal(got, []string{"agent_0"}) {
		t.Errorf("Agents() = %v", got)
	}
	if err := e.Close(); err != nil {
		t.Error(err)
	}
}

func TestMaxEpisodeSteps(t *testing.T) {
	o := DefaultOptions()
	o.MaxEpisodeSteps = 7
	e := newEnv(t, "freeway", o)
	for i := 1; i <= 7; i++ {
		s, err := e.Step([]api.Action{{Discrete: Noop}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Truncated[0] != (i == 7) || s.Terminated[0] {
			t.Fatalf("step %d: %+v", i, s)
		}
	}
}

func TestFactory(t *testing.T) {
	tests := []struct {
		cfg     map[string]any
		actions int
		ok      bool
	}{
		{nil, 6, true},
		{map[string]any{"sticky": 0.0, "minimal_actions": true, "ramping": false}, 3, true},
		{map[string]any{"sticky": int64(1), "max_episode_steps": uint16(1000)}, 6, true},
		{map[string]any{"sticky": 1.5}, 0, false},
		{map[string]any{"sticky": -0.1}, 0, false},
		{map[string]any{"sticky": "0.1"}, 0, false},
		{map[string]any{"minimal_actions": 1}, 0, false},
		{map[string]any{"ramp": true}, 0, false}, // misspelt
		{map[string]any{"max_episode_steps": -1}, 0, false},
	}
	for _, tc := range tests {
		e, err := Factory("breakout")(tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("Factory(breakout)(%v) = %v, want ok=%v", tc.cfg, err, tc.ok)
			continue
		}
		if err == nil && e.ActionSpace().N != tc.actions {
			t.Errorf("%v: %d actions, want %d", tc.cfg, e.ActionSpace().N, tc.actions)
		}
	}
	if _, err := Factory("pong")(nil); err == nil {
		t.Error("Factory(pong) succeeded")
	}
	if EnvName("space_invaders") != "minatar-space_invaders" {
		t.Error(EnvName("space_invaders"))
	}
}

func TestRender(t *testing.T) {
	e := exact(t, "breakout")
	text := e.Render()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != Size || lines[1] != "##########" || lines[9] != "....=....." {
		t.Errorf("Render:\n%s", text)
	}
	if !strings.Contains(e.Legend(), "#=brick") {
		t.Errorf("Legend %q", e.Legend())
	}
	var buf bytes.Buffer
	if err := e.WritePNG(&buf, 4); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil || img.Bounds().Dx() != 40 {
		t.Fatalf("PNG: %v, %v", img, err)
	}
	if err := e.WritePNG(&buf, 0); err == nil {
		t.Error("WritePNG scale 0 succeeded")
	}
}
