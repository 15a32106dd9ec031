package localreplay

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func mustMemory(t *testing.T, c Config) *Memory {
	t.Helper()
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// play records an episode of scalar rewards with values (estimates equal
// to values) and closes it.
func play(t *testing.T, m *Memory, rewards, values []float32, terminated bool, boot float32) {
	t.Helper()
	id, err := m.Open([]float32{0})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rewards {
		if err := m.Step(id, Step{Action: int32(i), Reward: []float32{rewards[i]}, Value: values[i], Estimate: values[i], Frame: []float32{float32(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(id, terminated, boot); err != nil {
		t.Fatal(err)
	}
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 }

// Returns of a 3-step episode, gamma 0.9, against hand computation
// (rewards 1, 2, 3; V(s_0..s_2) = 0.5, 1, 1.5; V(s_3) = 2 when truncated).
func TestReturnsHandComputed(t *testing.T) {
	rewards, values := []float32{1, 2, 3}, []float32{0.5, 1, 1.5}
	for _, tt := range []struct {
		name       string
		n          int
		lambda     float64
		terminated bool
		nstep      []float32
		discount   []float32
		lret       []float32
	}{
		// n=2: G_0 = 1 + .9*2 + .81*V2 = 4.015; G_1 = 2 + .9*3 + .81*2 = 6.32; G_2 = 3 + .9*2 = 4.8.
		// λ=.5: G_2 = 3 + .9*2 = 4.8; G_1 = 2 + .9*(.5*1.5 + .5*4.8) = 4.835; G_0 = 1 + .9*(.5*1 + .5*4.835) = 3.62575.
		{"n2 lambda.5 truncated", 2, 0.5, false, []float32{4.015, 6.32, 4.8}, []float32{.81, .81, .9}, []float32{3.62575, 4.835, 4.8}},
		// terminated: nothing after s_3. G_1 = 4.7, G_2 = 3 (discount 0).
		// λ: G_2 = 3; G_1 = 2 + .9*(.75 + 1.5) = 4.025; G_0 = 1 + .9*(.5 + 2.0125) = 3.26125.
		{"n2 lambda.5 terminated", 2, 0.5, true, []float32{4.015, 4.7, 3}, []float32{.81, 0, 0}, []float32{3.26125, 4.025, 3}},
		// λ=1 terminated is Monte-Carlo: 1 + .9*2 + .81*3 = 5.23, 2 + 2.7 = 4.7, 3.
		// n=5 > T: the n-step return is Monte-Carlo too.
		{"monte carlo", 5, 1, true, []float32{5.23, 4.7, 3}, []float32{0, 0, 0}, []float32{5.23, 4.7, 3}},
		// λ=0 and n=1: both the one-step target r_t + .9 V(s_{t+1}): 1.9, 3.35, 3 + .9*2 = 4.8.
		{"one step", 1, 0, false, []float32{1.9, 3.35, 4.8}, []float32{.9, .9, .9}, []float32{1.9, 3.35, 4.8}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := mustMemory(t, Config{FrameSize: 1, Gamma: 0.9, NStep: tt.n, Lambda: tt.lambda, MaxTransitions: 100, MaxEpisodes: 10})
			play(t, m, rewards, values, tt.terminated, 2)
			items := m.TakeNew()
			if len(items) != 3 {
				t.Fatalf("%d transitions", len(items))
			}
			for i, it := range items {
				tr := it.Transition
				if !near(tr.NStepReturn, tt.nstep[i]) || !near(tr.Discount, tt.discount[i]) || !near(tr.LambdaReturn, tt.lret[i]) {
					t.Errorf("t=%d: n-step %v discount %v lambda %v; want %v %v %v", i, tr.NStepReturn, tr.Discount, tr.LambdaReturn, tt.nstep[i], tt.discount[i], tt.lret[i])
				}
				// The target a learner rebuilds: Reward + Discount * V(next).
				next := min(i+tt.n, 3)
				v := float32(2)
				if next < 3 {
					v = values[next]
				}
				if !near(tr.Reward+tr.Discount*v, tr.NStepReturn) || tr.NextObs.Data[0] != float32(next) {
					t.Errorf("t=%d: reward %v discount %v next obs %v do not rebuild the n-step return", i, tr.Reward, tr.Discount, tr.NextObs.Data)
				}
				if want := float32(math.Abs(float64(tt.nstep[i]-values[i]))) + 1e-6; !near(it.Priority, want) {
					t.Errorf("t=%d: priority %v, want |G - V| + eps = %v", i, it.Priority, want)
				}
			}
		})
	}
}

// A 2-dimensional reward weighted [1, 0.5]: the scalar returns use the
// weighted reward, RewardVec keeps each dimension.
func TestVectorReward(t *testing.T) {
	m := mustMemory(t, Config{FrameSize: 1, Gamma: 0.5, NStep: 2, RewardWeights: []float32{1, 0.5}, MaxTransitions: 10, MaxEpisodes: 2})
	id, _ := m.Open([]float32{0})
	m.Step(id, Step{Reward: []float32{1, 2}, Frame: []float32{1}})
	m.Step(id, Step{Reward: []float32{0, 4}, Frame: []float32{2}})
	if err := m.Step(id, Step{Reward: []float32{1}, Frame: []float32{3}}); !errors.Is(err, ErrBadStep) {
		t.Fatalf("short reward: %v", err)
	}
	m.Close(id, true, 0)
	items := m.TakeNew()
	// scalar rewards 2 and 2: R_0 = 2 + .5*2 = 3; per dimension [1 + 0, 2 + .5*4] = [1, 4].
	if tr := items[0].Transition; tr.Reward != 3 || !slices.Equal(tr.RewardVec.Data, []float32{1, 4}) || tr.NStepReturn != 3 {
		t.Fatalf("t=0: %+v", tr)
	}
	if tr := items[1].Transition; tr.Reward != 2 || !slices.Equal(tr.RewardVec.Data, []float32{0, 4}) {
		t.Fatalf("t=1: %+v", tr)
	}
}

// Frame stacking of 3 frames of 2 floats: observations are built from
// frames stored once; the first frame repeats before the start.
func TestFrameStacking(t *testing.T) {
	m := mustMemory(t, Config{FrameSize: 2, FrameStack: 3, Gamma: 1, MaxTransitions: 10, MaxEpisodes: 2})
	f := func(i float32) []float32 { return []float32{i, 10 + i} }
	id, _ := m.Open(f(0))
	for i := range 3 {
		m.Step(id, Step{Reward: []float32{0}, Frame: f(float32(i + 1))})
	}
	m.Close(id, false, 0)
	if s := m.Stats(); s.Frames != 4 || s.Transitions != 3 {
		t.Fatalf("stats %+v: want 4 frames stored for 3 steps", s)
	}
	items := m.TakeNew()
	cat := func(fs ...[]float32) []float32 { return slices.Concat(fs...) }
	for i, want := range [][2][]float32{
		{cat(f(0), f(0), f(0)), cat(f(0), f(0), f(1))},
		{cat(f(0), f(0), f(1)), cat(f(0), f(1), f(2))},
		{cat(f(0), f(1), f(2)), cat(f(1), f(2), f(3))},
	} {
		tr := items[i].Transition
		if !slices.Equal(tr.Obs.Data, want[0]) || !slices.Equal(tr.NextObs.Data, want[1]) {
			t.Errorf("t=%d: obs %v next %v; want %v %v", i, tr.Obs.Data, tr.NextObs.Data, want[0], want[1])
		}
	}
}

// Frames that are images, [H, W, C] = [1, 2, 2], stack along their
// channels: an observation of 2 frames is [1, 2, 4], each pixel holding
// the older frame's channels, then the newer one's.
func TestFrameStackingImages(t *testing.T) {
	for _, bad := range [][]int{{1, 2, 3}, {0, 4}, {-1, -4}} {
		if _, err := New(Config{FrameSize: 4, FrameShape: bad, Gamma: 1, MaxTransitions: 10, MaxEpisodes: 2}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("frame_shape %v for 4 floats: %v, want ErrBadConfig", bad, err)
		}
	}
	m := mustMemory(t, Config{FrameSize: 4, FrameShape: []int{1, 2, 2}, FrameStack: 2, Gamma: 1, MaxTransitions: 10, MaxEpisodes: 2})
	// Frame i: pixel 0 has channels (i, 10+i), pixel 1 (20+i, 30+i).
	f := func(i float32) []float32 { return []float32{i, 10 + i, 20 + i, 30 + i} }
	id, _ := m.Open(f(0))
	for i := range 2 {
		m.Step(id, Step{Reward: []float32{0}, Frame: f(float32(i + 1))})
	}
	m.Close(id, true, 0)
	// stack(a, b): every pixel's channels of a, then of b.
	stack := func(a, b float32) []float32 { return []float32{a, 10 + a, b, 10 + b, 20 + a, 30 + a, 20 + b, 30 + b} }
	items := m.TakeNew()
	for i, want := range [][2][]float32{{stack(0, 0), stack(0, 1)}, {stack(0, 1), stack(1, 2)}} {
		tr := items[i].Transition
		if !slices.Equal(tr.Obs.Data, want[0]) || !slices.Equal(tr.NextObs.Data, want[1]) {
			t.Errorf("t=%d: obs %v next %v; want %v %v", i, tr.Obs.Data, tr.NextObs.Data, want[0], want[1])
		}
		if shape := []int{1, 2, 4}; !slices.Equal(tr.Obs.Shape, shape) || !slices.Equal(tr.NextObs.Shape, shape) {
			t.Errorf("t=%d: shapes %v %v, want %v", i, tr.Obs.Shape, tr.NextObs.Shape, shape)
		}
	}
	// Without stacking an image keeps its shape.
	one := mustMemory(t, Config{FrameSize: 4, FrameShape: []int{1, 2, 2}, Gamma: 1, MaxTransitions: 10, MaxEpisodes: 2})
	id, _ = one.Open(f(0))
	one.Step(id, Step{Reward: []float32{0}, Frame: f(1)})
	one.Close(id, true, 0)
	if tr := one.TakeNew()[0].Transition; !slices.Equal(tr.Obs.Shape, []int{1, 2, 2}) || !slices.Equal(tr.Obs.Data, f(0)) {
		t.Errorf("unstacked image: obs %v of shape %v, want %v of [1 2 2]", tr.Obs.Data, tr.Obs.Shape, f(0))
	}
}

// The memory stays within MaxTransitions (open episodes included) and
// MaxEpisodes by dropping the oldest closed episodes, counted.
func TestBounds(t *testing.T) {
	m := mustMemory(t, Config{FrameSize: 1, Gamma: 1, MaxTransitions: 10, MaxEpisodes: 3})
	four := []float32{1, 1, 1, 1}
	play(t, m, four, four, true, 0)
	play(t, m, four, four, true, 0)
	play(t, m, four, four, true, 0) // its third step needs room: the first episode goes
	if s := m.Stats(); s.Transitions != 8 || s.Episodes != 2 || s.DroppedEpisodes != 1 || s.DroppedTransitions != 4 {
		t.Fatalf("stats %+v", s)
	}
	for range 3 {
		play(t, m, []float32{1}, []float32{1}, true, 0)
	}
	if s := m.Stats(); s.Episodes != 3 || s.DroppedEpisodes != 3 || s.Transitions != 3 {
		t.Fatalf("stats after short episodes %+v", s)
	}
	// Every slot still sampleable, nothing stale.
	c, _ := m.SampleCache(50)
	for _, it := range c.Items {
		if it.Transition.Obs.Len() != 1 {
			t.Fatalf("stale item %+v", it)
		}
	}
	id, _ := m.Open([]float32{0})
	var err error
	for i := 0; err == nil && i < 20; i++ {
		err = m.Step(id, Step{Reward: []float32{0}, Frame: []float32{0}})
	}
	if !errors.Is(err, ErrMemoryFull) {
		t.Fatalf("episode longer than the memory: %v", err)
	}
	if err := m.Step(99, Step{}); !errors.Is(err, ErrUnknownEpisode) {
		t.Fatalf("unknown episode: %v", err)
	}
	if _, err := New(Config{FrameSize: 1, Gamma: 2, MaxTransitions: 1, MaxEpisodes: 1}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("gamma 2: %v", err)
	}
}

// Local priority updates by key change what the cache draws.
func TestLocalPriorityUpdate(t *testing.T) {
	m := mustMemory(t, Config{FrameSize: 1, Gamma: 0, Alpha: 1, MaxTransitions: 10, MaxEpisodes: 5})
	play(t, m, []float32{1, 1, 1}, []float32{0, 0, 0}, true, 0) // priorities all ~1
	items := m.TakeNew()
	_, err := m.UpdatePriorities([]uint64{items[0].Key, items[1].Key, items[2].Key, 999}, []float32{0, 0, 5})
	if err == nil {
		t.Fatal("length mismatch accepted")
	}
	n, err := m.UpdatePriorities([]uint64{items[0].Key, items[1].Key, 999}, []float32{0, 0, 5})
	if err != nil || n != 2 {
		t.Fatalf("update: %d %v", n, err)
	}
	c, _ := m.SampleCache(100)
	for _, it := range c.Items {
		if it.Key != items[2].Key {
			t.Fatalf("drew key %d of priority ~0", it.Key)
		}
	}
	if _, err := m.UpdatePriorities([]uint64{items[0].Key}, []float32{float32(math.NaN())}); !errors.Is(err, ErrBadStep) {
		t.Fatalf("NaN: %v", err)
	}
}
