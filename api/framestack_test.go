package api

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

// framesEnv's observation after t steps is frame(t): value i of it is
// 10·t + i, so a stacked observation shows which frame went where. Its
// episodes end after 3 steps. shape is the observation's shape.
type framesEnv struct {
	shape []int
	t     int
}

func (e *framesEnv) size() int { return NewBox(0, 1, e.shape...).Size() }

func (e *framesEnv) frame() []float32 {
	o := make([]float32, e.size())
	for i := range o {
		o[i] = float32(10*e.t + i)
	}
	return o
}

func (e *framesEnv) Reset(int64) ([][]float32, error) { e.t = 0; return [][]float32{e.frame()}, nil }
func (e *framesEnv) Step([]Action) (Step, error) {
	e.t++
	return Step{Obs: [][]float32{e.frame()}, Rewards: []float32{1}, Terminated: []bool{e.t == 3}, Truncated: []bool{false}}, nil
}
func (e *framesEnv) ObservationSpace() Space {
	s := NewBox(0, 100, e.shape...)
	for i := range s.Low {
		s.Low[i] = float32(-i) // per-element bounds, to see them stacked too
	}
	return s
}
func (e *framesEnv) ActionSpace() Space { return NewDiscrete(2) }
func (e *framesEnv) Agents() []string   { return []string{"agent_0"} }
func (e *framesEnv) Close() error       { return nil }

// registerFrames registers name as a framesEnv factory (shape from the
// "shape" key; any other key is refused, frame_stack included, so the test
// sees that NewEnv takes it out) and, with batch, a batch factory too.
func registerFrames(t *testing.T, name string, batch bool) {
	t.Helper()
	factory := func(cfg map[string]any) (Env, error) {
		if err := Config(cfg).CheckKeys("image"); err != nil {
			return nil, err
		}
		if cfg["image"] == true {
			return &framesEnv{shape: []int{1, 2, 2}}, nil
		}
		return &framesEnv{shape: []int{3}}, nil
	}
	if err := RegisterEnv(name, factory); err != nil {
		t.Fatal(err)
	}
	if batch {
		err := RegisterEnvBatch(name, func(_ context.Context, cfg map[string]any, n int, _ *slog.Logger) (EnvBatch, error) {
			envs := make([]Env, n)
			for i := range envs {
				e, err := factory(cfg)
				if err != nil {
					return nil, err
				}
				envs[i] = e
			}
			return SerialBatch(envs...), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		registry.mu.Lock()
		defer registry.mu.Unlock()
		delete(registry.factories, name)
		delete(registry.batches, name)
	})
}

func f32(v ...float32) []float32 { return v }

func TestFrameStackImage(t *testing.T) {
	registerFrames(t, "api-test-frames-image", false)
	e, err := NewEnv("api-test-frames-image", map[string]any{"image": true, FrameStackKey: 3})
	if err != nil {
		t.Fatal(err)
	}
	// [1, 2, 2]: two pixels of two channels; each pixel's channels frame
	// after frame, oldest first.
	if got := e.ObservationSpace(); !reflect.DeepEqual(got.Shape, []int{1, 2, 6}) ||
		!reflect.DeepEqual(got.Low, f32(0, -1, 0, -1, 0, -1, -2, -3, -2, -3, -2, -3)) {
		t.Fatalf("space %+v", got)
	}
	obs, err := e.Reset(1)
	if err != nil {
		t.Fatal(err)
	}
	steps := [][]float32{
		f32(0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3),         // frame 0 three times
		f32(0, 1, 0, 1, 10, 11, 2, 3, 2, 3, 12, 13),     // 0, 0, 1
		f32(0, 1, 10, 11, 20, 21, 2, 3, 12, 13, 22, 23), // 0, 1, 2
		f32(10, 11, 20, 21, 30, 31, 12, 13, 22, 23, 32, 33),
	}
	if !reflect.DeepEqual(obs[0], steps[0]) {
		t.Fatalf("reset: %v, want %v", obs[0], steps[0])
	}
	for i, want := range steps[1:] {
		s, err := e.Step([]Action{{}})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.Obs[0], want) {
			t.Fatalf("step %d: %v, want %v", i+1, s.Obs[0], want)
		}
	}
	// A new episode starts from its own first frame only.
	if obs, _ := e.Reset(2); !reflect.DeepEqual(obs[0], steps[0]) {
		t.Fatalf("second reset: %v", obs[0])
	}
}

// A vector's frames are concatenated, and a batch, built by the name's
// batch factory or of single environments, stacks as NewEnv does.
func TestFrameStackVectorAndBatch(t *testing.T) {
	registerFrames(t, "api-test-frames-vec", false)
	registerFrames(t, "api-test-frames-batch", true)
	cfg := map[string]any{FrameStackKey: 2}
	want := [][]float32{f32(0, 1, 2, 0, 1, 2), f32(0, 1, 2, 10, 11, 12), f32(10, 11, 12, 20, 21, 22)}
	for _, name := range []string{"api-test-frames-vec", "api-test-frames-batch"} {
		b, err := NewEnvBatch(context.Background(), name, cfg, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.ObservationSpace().Shape; !reflect.DeepEqual(got, []int{6}) {
			t.Fatalf("%s: shape %v", name, got)
		}
		resets := []EnvReset{{Env: 0}, {Env: 1}}
		if err := b.Run(context.Background(), resets, nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range resets {
			if !reflect.DeepEqual(r.Obs[0], want[0]) {
				t.Fatalf("%s: reset of %d: %v", name, r.Env, r.Obs[0])
			}
		}
		for k := 1; k < 3; k++ {
			steps := []EnvStep{{Env: 0, Actions: []Action{{}}}, {Env: 1, Actions: []Action{{}}}}
			if err := b.Run(context.Background(), nil, steps); err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				if !reflect.DeepEqual(s.Result.Obs[0], want[k]) {
					t.Fatalf("%s: step %d of %d: %v, want %v", name, k, s.Env, s.Result.Obs[0], want[k])
				}
			}
		}
	}
}

func TestFrameStackRefuses(t *testing.T) {
	registerFrames(t, "api-test-frames-bad", false)
	for _, v := range []any{0, -1, MaxFrameStack + 1, 1.5, "four"} {
		_, err := NewEnv("api-test-frames-bad", map[string]any{FrameStackKey: v})
		if err == nil || !strings.Contains(err.Error(), FrameStackKey) {
			t.Errorf("frame_stack %v: %v, want an error naming %s", v, err, FrameStackKey)
		}
	}
	// 1 stacks nothing: the environment itself.
	if e, err := NewEnv("api-test-frames-bad", map[string]any{FrameStackKey: 1}); err != nil {
		t.Fatal(err)
	} else if _, ok := e.(*framesEnv); !ok {
		t.Errorf("frame_stack 1 wrapped the environment: %T", e)
	}
	if _, err := NewFrameStack(&stubDiscreteObs{}, 2); err == nil || !strings.Contains(err.Error(), "Box") {
		t.Errorf("a Discrete observation: %v, want refused", err)
	}
}

type stubDiscreteObs struct{ stubEnv }

func (*stubDiscreteObs) ObservationSpace() Space { return NewDiscrete(4) }
