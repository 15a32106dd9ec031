package api

import (
	"context"
	"testing"
)

// TestAppendBatch: a batch appended twice runs each call on the right
// environment, keeps the first batch usable on its own, and closes all.
func TestAppendBatch(t *testing.T) {
	ctx := context.Background()
	envs := make([]*countingEnv, 6)
	for i := range envs {
		envs[i] = &countingEnv{}
	}
	first := SerialBatch(envs[0], envs[1])
	ab, err := AppendBatch(first, SerialBatch(envs[2], envs[3], envs[4]))
	if err != nil {
		t.Fatal(err)
	}
	abc, err := AppendBatch(ab, SerialBatch(envs[5]))
	if err != nil {
		t.Fatal(err)
	}
	if first.Len() != 2 || ab.Len() != 5 || abc.Len() != 6 {
		t.Fatalf("lengths %d, %d, %d; want 2, 5, 6", first.Len(), ab.Len(), abc.Len())
	}
	// Env 3 twice, 5 once, 0 once, and a reset of 4: in no part's order.
	steps := []EnvStep{{Env: 5}, {Env: 3}, {Env: 0}}
	resets := []EnvReset{{Env: 4, Seed: 9}}
	if err := abc.Run(ctx, resets, steps); err != nil {
		t.Fatal(err)
	}
	if err := abc.Run(ctx, nil, []EnvStep{{Env: 3}}); err != nil {
		t.Fatal(err)
	}
	want := []int{1, 0, 0, 2, 0, 1}
	for i, e := range envs {
		if e.steps != want[i] {
			t.Errorf("environment %d stepped %d times, want %d", i, e.steps, want[i])
		}
	}
	if steps[0].Result.Rewards[0] != 1 || steps[1].Result.Rewards[0] != 1 || len(resets[0].Obs) != 1 {
		t.Errorf("results not copied back: steps %+v, reset %v", steps, resets[0].Obs)
	}
	// The first batch on its own, as the ring's first targets use it.
	if err := first.Run(ctx, nil, []EnvStep{{Env: 1}}); err != nil || envs[1].steps != 1 {
		t.Errorf("first batch alone: %v, env 1 stepped %d", err, envs[1].steps)
	}
	for _, bad := range []int{-1, 6} {
		if err := abc.Run(ctx, nil, []EnvStep{{Env: bad}}); err == nil {
			t.Errorf("step of environment %d of 6: no error", bad)
		}
	}
	if err := abc.Close(); err != nil {
		t.Fatal(err)
	}
	for i, e := range envs {
		if !e.closed {
			t.Errorf("environment %d not closed", i)
		}
	}
}

func TestAppendBatchRefusesOtherSpaces(t *testing.T) {
	other := &otherSpaceEnv{}
	if _, err := AppendBatch(SerialBatch(&countingEnv{}), SerialBatch(other)); err == nil {
		t.Error("batches of different observation spaces appended")
	}
}

type otherSpaceEnv struct{ stubEnv }

func (e *otherSpaceEnv) ObservationSpace() Space { return NewBox(0, 1, 3) }

// turnEnv is a one-agent environment whose agent acts on every other step
// (api.Turns), starting idle.
type turnEnv struct{ countingEnv }

func (e *turnEnv) Acting() []bool { return []bool{e.steps%2 == 1} }

// TestBatchesCarryTurns: SerialBatch reports an environment's turns after
// a reset and a step, and a joined batch copies them back; without turns
// Acting stays nil.
func TestBatchesCarryTurns(t *testing.T) {
	ctx := context.Background()
	plain, turns := &countingEnv{}, &turnEnv{}
	b, err := AppendBatch(SerialBatch(plain), SerialBatch(turns))
	if err != nil {
		t.Fatal(err)
	}
	resets := []EnvReset{{Env: 0}, {Env: 1}}
	if err := b.Run(ctx, resets, nil); err != nil {
		t.Fatal(err)
	}
	if resets[0].Acting != nil || len(resets[1].Acting) != 1 || resets[1].Acting[0] {
		t.Errorf("after reset: acting %v and %v, want nil and [false]", resets[0].Acting, resets[1].Acting)
	}
	steps := []EnvStep{{Env: 0}, {Env: 1}}
	if err := b.Run(ctx, nil, steps); err != nil {
		t.Fatal(err)
	}
	if steps[0].Result.Acting != nil || len(steps[1].Result.Acting) != 1 || !steps[1].Result.Acting[0] {
		t.Errorf("after a step: acting %v and %v, want nil and [true]", steps[0].Result.Acting, steps[1].Result.Acting)
	}
	if !IsActing(nil, 0) || IsActing([]bool{true, false}, 1) {
		t.Error("IsActing: nil must mean every agent acts")
	}
}
