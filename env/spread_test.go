package env_test

import (
	"errors"
	"math"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
)

func newSpread(t *testing.T, n int) *env.SimpleSpread {
	t.Helper()
	return newSpreadWith(t, n)
}

func newSpreadWith(t *testing.T, n int, opts ...env.SpreadOption) *env.SimpleSpread {
	t.Helper()
	s, err := env.NewSimpleSpread(n, env.SimpleSpreadMaxCycles, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reset(1); err != nil {
		t.Fatal(err)
	}
	return s
}

func setSpread(t *testing.T, s *env.SimpleSpread, agents, landmarks [][2]float64) {
	t.Helper()
	if err := s.SetState(env.SpreadState{AgentPos: agents, AgentVel: make([][2]float64, len(agents)), LandmarkPos: landmarks}); err != nil {
		t.Fatal(err)
	}
}

func stepSpread(t *testing.T, s *env.SimpleSpread, actions ...int32) api.Step {
	t.Helper()
	as := make([]api.Action, len(actions))
	for i, a := range actions {
		as[i].Discrete = a
	}
	st, err := s.Step(as)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSimpleSpreadShapes(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		s := newSpread(t, n)
		wantDim := 4 + 2*n + 2*(n-1)
		if got := s.ObservationSpace(); got.Size() != wantDim || got.Validate() != nil {
			t.Errorf("n=%d: observation space %+v, want Box(%d)", n, got, wantDim)
		}
		if got := s.ActionSpace(); got.Kind != api.Discrete || got.N != 5 {
			t.Errorf("n=%d: action space %+v, want Discrete(5)", n, got)
		}
		if got := s.Agents(); len(got) != n || got[n-1] != "agent_"+string(rune('0'+n-1)) {
			t.Errorf("n=%d: Agents() = %v", n, got)
		}
		obs, err := s.Reset(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		st := stepSpread(t, s, make([]int32, n)...)
		for _, o := range [][][]float32{obs, st.Obs} {
			if len(o) != n {
				t.Fatalf("n=%d: %d observations", n, len(o))
			}
			for _, a := range o {
				if len(a) != wantDim {
					t.Fatalf("n=%d: observation of %d values, want %d", n, len(a), wantDim)
				}
			}
		}
		if len(st.Rewards) != n || len(st.Terminated) != n || len(st.Truncated) != n {
			t.Errorf("n=%d: step %+v", n, st)
		}
	}
}

// TestSimpleSpreadObservation checks the layout on a hand-placed world:
// [vel, pos, landmarks - pos, other agents - pos].
func TestSimpleSpreadObservation(t *testing.T) {
	s := newSpread(t, 2)
	err := s.SetState(env.SpreadState{
		AgentPos:    [][2]float64{{0.5, -0.5}, {-1, 1}},
		AgentVel:    [][2]float64{{0.25, 0}, {0, -0.75}},
		LandmarkPos: [][2]float64{{1, 1}, {0, 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Positions after a no-op step: vel*0.75 then pos += vel*0.1, so agent 0
	// moves by 0.25*0.75*0.1 = 0.01875 in x and agent 1 by -0.75*0.75*0.1 =
	// -0.05625 in y (they are far apart: no contact force).
	st := stepSpread(t, s, env.SpreadNoop, env.SpreadNoop)
	p0 := [2]float32{0.51875, -0.5}
	p1 := [2]float32{-1, 0.94375}
	want := [][]float32{
		{0.1875, 0, p0[0], p0[1], 1 - p0[0], 1 - p0[1], 0 - p0[0], 0 - p0[1], p1[0] - p0[0], p1[1] - p0[1]},
		{0, -0.5625, p1[0], p1[1], 1 - p1[0], 1 - p1[1], 0 - p1[0], 0 - p1[1], p0[0] - p1[0], p0[1] - p1[1]},
	}
	for i := range want {
		for k := range want[i] {
			if math.Abs(float64(st.Obs[i][k]-want[i][k])) > 1e-6 {
				t.Fatalf("agent %d observation\n got %v\nwant %v", i, st.Obs[i], want[i])
			}
		}
	}
}

func TestSimpleSpreadReward(t *testing.T) {
	tests := []struct {
		name      string
		agents    [][2]float64
		landmarks [][2]float64
		want      float64
	}{
		{
			// Nearest agent per landmark: (0, 0.5) is 0.5 from agents 0 and
			// 2; (1, 1) is 1 from agents 1 and 2; (-0.3, -0.4) is
			// sqrt(0.09 + 0.16) = 0.5 from agent 0. No pair is closer than
			// 0.3. Reward = -(0.5 + 1 + 0.5) = -2.
			"spread out",
			[][2]float64{{0, 0}, {1, 0}, {0, 1}},
			[][2]float64{{0, 0.5}, {1, 1}, {-0.3, -0.4}},
			-2,
		},
		{
			// Every landmark is covered (distance 0) but agents 0 and 1
			// are 0.2 apart (< 2*0.15): one colliding pair.
			"one collision",
			[][2]float64{{0, 0}, {0.2, 0}, {3, 3}},
			[][2]float64{{0, 0}, {0.2, 0}, {3, 3}},
			-1,
		},
		{
			// All three agents on one spot: three colliding pairs; the
			// landmarks are 3, 4 and 5 away: -(3 + 4 + 5) - 3 = -15.
			"pile up",
			[][2]float64{{0, 0}, {0, 0}, {0, 0}},
			[][2]float64{{3, 0}, {0, 4}, {-3, -4}},
			-15,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSpread(t, 3)
			setSpread(t, s, tc.agents, tc.landmarks)
			if got := s.Reward(); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("reward = %v, want %v", got, tc.want)
			}
		})
	}

	// Through Step: agents at rest far apart stay put under no-ops, so the
	// reward after the step is the "spread out" value for every agent.
	s := newSpread(t, 3)
	setSpread(t, s, tests[0].agents, tests[0].landmarks)
	st := stepSpread(t, s, 0, 0, 0)
	for i, r := range st.Rewards {
		if r != -2 {
			t.Errorf("agent %d reward %v, want -2", i, r)
		}
	}
}

// spreadScenes are hand-placed worlds of three agents with the reward terms
// worked out by hand: D, the sum over landmarks of the distance to the
// nearest agent; hits, each agent's collisions with the other agents
// (centres closer than 2*0.15); and pairs, the colliding pairs.
var spreadScenes = []struct {
	name              string
	agents, landmarks [][2]float64
	d                 float64
	hits              []float64
	pairs             float64
}{
	{
		// TestSimpleSpreadReward's "spread out": D = 0.5 + 1 + 0.5.
		"spread out", [][2]float64{{0, 0}, {1, 0}, {0, 1}}, [][2]float64{{0, 0.5}, {1, 1}, {-0.3, -0.4}},
		2, []float64{0, 0, 0}, 0,
	},
	{
		// Every landmark covered and no pair closer than 1: the optimum.
		"on the landmarks", [][2]float64{{0, 0}, {1, 0}, {0, 1}}, [][2]float64{{0, 1}, {0, 0}, {1, 0}},
		0, []float64{0, 0, 0}, 0,
	},
	{
		// Landmarks covered; agents 0 and 1 are 0.2 apart.
		"one colliding pair", [][2]float64{{0, 0}, {0.2, 0}, {3, 3}}, [][2]float64{{0, 0}, {0.2, 0}, {3, 3}},
		0, []float64{1, 1, 0}, 1,
	},
	{
		// All three on one spot, landmarks 3, 4 and 5 away.
		"pile up", [][2]float64{{0, 0}, {0, 0}, {0, 0}}, [][2]float64{{3, 0}, {0, 4}, {-3, -4}},
		12, []float64{2, 2, 2}, 3,
	},
}

// TestSimpleSpreadRewardDefinitions checks each definition on the scenes
// against numbers computed by hand from the sources' formulas (N = 3):
//
//	distrl:      every agent -D - pairs
//	mappo:       every agent sum_i (-D - hits_i - 1) = -3D - 2 pairs - 3,
//	             the -1 per agent being MPE's is_collision(a, a)
//	pettingzoo:  agent i (1 - ratio)(-D) + ratio(-hits_i)
func TestSimpleSpreadRewardDefinitions(t *testing.T) {
	want := map[string]struct{ distrl, mappo float64 }{
		"spread out":         {-2, -9},
		"on the landmarks":   {0, -3},
		"one colliding pair": {-1, -5},
		"pile up":            {-15, -45},
	}
	// PettingZoo, per agent, for local_ratio 0.5 and 0.2.
	wantPZ := map[string]map[float64][]float64{
		"spread out":         {0.5: {-1, -1, -1}, 0.2: {-1.6, -1.6, -1.6}},
		"on the landmarks":   {0.5: {0, 0, 0}, 0.2: {0, 0, 0}},
		"one colliding pair": {0.5: {-0.5, -0.5, 0}, 0.2: {-0.2, -0.2, 0}},
		"pile up":            {0.5: {-7, -7, -7}, 0.2: {-10, -10, -10}},
	}
	check := func(t *testing.T, s *env.SimpleSpread, want []float64) {
		t.Helper()
		got := s.Rewards()
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("%s rewards %v, want %v", s.RewardDef(), got, want)
				return
			}
		}
	}
	same := func(r float64) []float64 { return []float64{r, r, r} }
	for _, sc := range spreadScenes {
		t.Run(sc.name, func(t *testing.T) {
			// The hand-computed terms agree with the formulas' values above.
			if w := want[sc.name]; w.distrl != -sc.d-sc.pairs || w.mappo != -3*sc.d-2*sc.pairs-3 {
				t.Fatalf("table inconsistent: %+v for D=%v pairs=%v", w, sc.d, sc.pairs)
			}
			for _, def := range []env.SpreadReward{env.SpreadRewardDistrl, env.SpreadRewardMAPPO} {
				s := newSpreadWith(t, 3, env.WithSpreadReward(def))
				setSpread(t, s, sc.agents, sc.landmarks)
				w := want[sc.name].distrl
				if def == env.SpreadRewardMAPPO {
					w = want[sc.name].mappo
				}
				check(t, s, same(w))
			}
			for ratio, w := range wantPZ[sc.name] {
				for i, h := range sc.hits {
					if v := (1-ratio)*-sc.d + ratio*-h; math.Abs(v-w[i]) > 1e-12 {
						t.Fatalf("table inconsistent: ratio %v agent %d: %v, formula %v", ratio, i, w[i], v)
					}
				}
				opts := []env.SpreadOption{env.WithSpreadReward(env.SpreadRewardPettingZoo)}
				if ratio != env.SpreadLocalRatio {
					opts = append(opts, env.WithSpreadLocalRatio(ratio))
				}
				s := newSpreadWith(t, 3, opts...)
				setSpread(t, s, sc.agents, sc.landmarks)
				check(t, s, w)
			}
		})
	}

	// The self-collision constant does not depend on N agents being 3: one
	// agent 1 from its landmark scores -1 - 1 under MAPPO's definition.
	s := newSpreadWith(t, 1, env.WithSpreadReward(env.SpreadRewardMAPPO))
	setSpread(t, s, [][2]float64{{0, 0}}, [][2]float64{{0.6, 0.8}})
	check(t, s, []float64{-2})

	// Through Step: still agents far apart stay put under no-ops, so the
	// step's rewards are the scene's, as float32.
	s = newSpreadWith(t, 3, env.WithSpreadReward(env.SpreadRewardMAPPO))
	setSpread(t, s, spreadScenes[0].agents, spreadScenes[0].landmarks)
	st := stepSpread(t, s, 0, 0, 0)
	for i, r := range st.Rewards {
		if r != -9 {
			t.Errorf("agent %d reward %v after a step, want -9", i, r)
		}
	}
}

// TestSimpleSpreadMAPPOEpisodeConstant: an episode spent on the landmarks,
// apart, scores 0 by distrl's definition and 3 agents x 25 steps x -1 =
// -75 by MAPPO's, the self-collision term alone.
func TestSimpleSpreadMAPPOEpisodeConstant(t *testing.T) {
	sc := spreadScenes[1]
	var ret [2]float64
	for k, def := range []env.SpreadReward{env.SpreadRewardDistrl, env.SpreadRewardMAPPO} {
		s := newSpreadWith(t, 3, env.WithSpreadReward(def))
		setSpread(t, s, sc.agents, sc.landmarks)
		for range env.SimpleSpreadMaxCycles {
			ret[k] += float64(stepSpread(t, s, 0, 0, 0).Rewards[0])
		}
	}
	if ret != [2]float64{0, -75} {
		t.Errorf("episode returns (distrl, mappo) = %v, want [0 -75]", ret)
	}
}

func TestSimpleSpreadRewardOptions(t *testing.T) {
	if s := newSpread(t, 3); s.RewardDef() != env.SpreadRewardDistrl {
		t.Errorf("default reward %q, want distrl", s.RewardDef())
	}
	bad := [][]env.SpreadOption{
		{env.WithSpreadReward("mpe")},
		{env.WithSpreadReward(env.SpreadRewardPettingZoo), env.WithSpreadLocalRatio(1.5)},
		{env.WithSpreadReward(env.SpreadRewardPettingZoo), env.WithSpreadLocalRatio(math.NaN())},
		{env.WithSpreadLocalRatio(0.5)}, // distrl has no local part
		{env.WithSpreadReward(env.SpreadRewardMAPPO), env.WithSpreadLocalRatio(0.5)},
	}
	for i, opts := range bad {
		if _, err := env.NewSimpleSpread(3, 25, opts...); err == nil {
			t.Errorf("options %d accepted", i)
		}
	}

	if err := env.Register(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg map[string]any
		ok  bool
	}{
		{map[string]any{"reward": "mappo"}, true},
		{map[string]any{"reward": "pettingzoo", "local_ratio": 0.25}, true},
		{map[string]any{"reward": "pettingzoo", "local_ratio": 1}, true},
		{map[string]any{"reward": "distrl"}, true},
		{map[string]any{"reward": "MAPPO"}, false},
		{map[string]any{"reward": 1}, false},
		{map[string]any{"local_ratio": 0.5}, false},
		{map[string]any{"reward": "pettingzoo", "local_ratio": "half"}, false},
	} {
		if _, err := api.NewEnv(env.SimpleSpreadName, tc.cfg); (err == nil) != tc.ok {
			t.Errorf("NewEnv(simple_spread, %v) = %v, want ok=%v", tc.cfg, err, tc.ok)
		}
	}
}

func TestSimpleSpreadSharedReward(t *testing.T) {
	s := newSpread(t, 4)
	for i := range 20 {
		st := stepSpread(t, s, int32(i%5), int32((i+1)%5), int32((i+2)%5), int32((i*3)%5))
		for _, r := range st.Rewards {
			if r != st.Rewards[0] || r > 0 {
				t.Fatalf("step %d: rewards %v, want equal and non-positive", i, st.Rewards)
			}
		}
	}
}

func TestSimpleSpreadPhysics(t *testing.T) {
	far := [][2]float64{{-5, -5}, {5, 5}, {5, -5}}
	lms := [][2]float64{{0, 0}, {0, 0}, {0, 0}}

	t.Run("no-op keeps still agents still", func(t *testing.T) {
		s := newSpread(t, 3)
		setSpread(t, s, far, lms)
		for range 3 {
			stepSpread(t, s, 0, 0, 0)
		}
		st := s.State()
		for i := range far {
			if st.AgentPos[i] != far[i] || st.AgentVel[i] != [2]float64{} {
				t.Errorf("agent %d moved: pos %v vel %v", i, st.AgentPos[i], st.AgentVel[i])
			}
		}
	})

	t.Run("action then coast", func(t *testing.T) {
		s := newSpread(t, 3)
		setSpread(t, s, far, lms)
		// Right: force 5 along x; vel = 0*0.75 + 5*0.1 = 0.5; pos += 0.5*0.1.
		// Up for agent 1 likewise along y; agent 2 goes left.
		stepSpread(t, s, env.SpreadRight, env.SpreadUp, env.SpreadLeft)
		// No-op: vel = 0.5*0.75 = 0.375; pos += 0.0375 (0.0875 in all).
		stepSpread(t, s, 0, 0, 0)
		st := s.State()
		want := []struct{ pos, vel [2]float64 }{
			{[2]float64{-5 + 0.0875, -5}, [2]float64{0.375, 0}},
			{[2]float64{5, 5 + 0.0875}, [2]float64{0, 0.375}},
			{[2]float64{5 - 0.0875, -5}, [2]float64{-0.375, 0}},
		}
		for i, w := range want {
			for k := range 2 {
				if !near(st.AgentPos[i][k], w.pos[k]) || !near(st.AgentVel[i][k], w.vel[k]) {
					t.Errorf("agent %d: pos %v vel %v, want %v %v", i, st.AgentPos[i], st.AgentVel[i], w.pos, w.vel)
				}
			}
		}
	})

	t.Run("contact pushes overlapping agents apart", func(t *testing.T) {
		s := newSpread(t, 3)
		setSpread(t, s, [][2]float64{{0, 0}, {0.2, 0}, {5, 5}}, lms)
		// dist 0.2 < 0.3: penetration = 1e-3*log(1 + exp((0.3-0.2)/1e-3))
		// = 1e-3*(100 + log1p(exp(-100))) = 0.1; force = 100*0.1 = 10 along
		// the line between centres; vel = 10*0.1 = 1; pos moves 1*0.1.
		stepSpread(t, s, 0, 0, 0)
		st := s.State()
		want := [][2][2]float64{{{-0.1, 0}, {-1, 0}}, {{0.3, 0}, {1, 0}}}
		for i, w := range want {
			for k := range 2 {
				if !near(st.AgentPos[i][k], w[0][k]) || !near(st.AgentVel[i][k], w[1][k]) {
					t.Errorf("agent %d: pos %v vel %v, want %v %v", i, st.AgentPos[i], st.AgentVel[i], w[0], w[1])
				}
			}
		}
	})

	t.Run("coincident agents do not produce NaN", func(t *testing.T) {
		s := newSpread(t, 3)
		setSpread(t, s, [][2]float64{{1, 1}, {1, 1}, {-1, -1}}, lms)
		st := stepSpread(t, s, 0, 0, 0)
		for _, o := range st.Obs {
			for _, v := range o {
				if math.IsNaN(float64(v)) {
					t.Fatalf("NaN in observation %v", o)
				}
			}
		}
	})
}

func TestSimpleSpreadTruncation(t *testing.T) {
	s := newSpread(t, 3)
	for i := 1; i <= env.SimpleSpreadMaxCycles; i++ {
		st := stepSpread(t, s, 1, 2, 3)
		for a := range 3 {
			if st.Terminated[a] {
				t.Fatalf("step %d: agent %d terminated", i, a)
			}
			if st.Truncated[a] != (i == env.SimpleSpreadMaxCycles) {
				t.Fatalf("step %d: agent %d truncated=%v", i, a, st.Truncated[a])
			}
		}
	}
	if _, err := s.Step(make([]api.Action, 3)); !errors.Is(err, api.ErrNeedsReset) {
		t.Errorf("Step after truncation = %v, want ErrNeedsReset", err)
	}
}

func TestSimpleSpreadReset(t *testing.T) {
	s := newSpread(t, 3)
	a, _ := s.Reset(9)
	stepSpread(t, s, 1, 1, 1)
	b, _ := s.Reset(9)
	c, _ := s.Reset(10)
	same := func(x, y [][]float32) bool {
		for i := range x {
			for k := range x[i] {
				if x[i][k] != y[i][k] {
					return false
				}
			}
		}
		return true
	}
	if !same(a, b) || same(a, c) {
		t.Errorf("seeded resets: same seed equal=%v, different seeds equal=%v", same(a, b), same(a, c))
	}
	st := s.State()
	for i := range 3 {
		for _, p := range [][2]float64{st.AgentPos[i], st.LandmarkPos[i]} {
			if p[0] < -1 || p[0] >= 1 || p[1] < -1 || p[1] >= 1 {
				t.Errorf("position %v outside [-1, 1)^2", p)
			}
		}
		if st.AgentVel[i] != [2]float64{} {
			t.Errorf("agent %d starts moving: %v", i, st.AgentVel[i])
		}
	}
}

func TestSimpleSpreadInvalid(t *testing.T) {
	s := newSpread(t, 3)
	for _, actions := range [][]api.Action{nil, make([]api.Action, 2), {{Discrete: 0}, {Discrete: 5}, {Discrete: 0}}, {{Discrete: -1}, {}, {}}} {
		if _, err := s.Step(actions); !errors.Is(err, api.ErrInvalidAction) {
			t.Errorf("Step(%v) = %v, want ErrInvalidAction", actions, err)
		}
	}
	if err := s.SetState(env.SpreadState{AgentPos: make([][2]float64, 2)}); err == nil {
		t.Error("SetState with the wrong sizes succeeded")
	}
	for _, args := range [][2]int{{0, 25}, {3, 0}, {100000, 25}} {
		if _, err := env.NewSimpleSpread(args[0], args[1]); err == nil {
			t.Errorf("NewSimpleSpread%v succeeded", args)
		}
	}
	fresh, _ := env.NewSimpleSpread(3, 25)
	if _, err := fresh.Step(make([]api.Action, 3)); !errors.Is(err, api.ErrNeedsReset) {
		t.Errorf("Step before Reset = %v, want ErrNeedsReset", err)
	}
}

func BenchmarkSimpleSpreadStep(b *testing.B) {
	s, err := env.NewSimpleSpread(env.SimpleSpreadAgents, env.SimpleSpreadMaxCycles)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Reset(0); err != nil {
		b.Fatal(err)
	}
	actions := make([]api.Action, env.SimpleSpreadAgents)
	i := 0
	for b.Loop() {
		for k := range actions {
			actions[k].Discrete = int32((i + k) % 5)
		}
		i++
		st, err := s.Step(actions)
		if err != nil {
			b.Fatal(err)
		}
		if st.Truncated[0] {
			if _, err := s.Reset(int64(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}
