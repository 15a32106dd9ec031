package api

import (
	"context"
	"errors"
	"log/slog"
	"testing"
)

// countingEnv counts its calls and returns its step count as the reward.
type countingEnv struct {
	stubEnv
	steps int
}

func (e *countingEnv) Step([]Action) (Step, error) {
	e.steps++
	return Step{Obs: [][]float32{{0}}, Rewards: []float32{float32(e.steps)}, Terminated: []bool{false}, Truncated: []bool{false}}, nil
}

func TestNewEnvBatch(t *testing.T) {
	const serial, batched = "api-test-serial", "api-test-batched"
	t.Cleanup(func() {
		registry.mu.Lock()
		defer registry.mu.Unlock()
		delete(registry.factories, serial)
		delete(registry.batches, batched)
	})
	if err := RegisterEnv(serial, func(map[string]any) (Env, error) { return &countingEnv{}, nil }); err != nil {
		t.Fatal(err)
	}
	var made int
	batchFactory := func(_ context.Context, _ map[string]any, n int, _ *slog.Logger) (EnvBatch, error) {
		made = n
		return SerialBatch(&countingEnv{}), nil
	}
	if err := RegisterEnvBatch(batched, batchFactory); err != nil {
		t.Fatal(err)
	}
	if err := RegisterEnvBatch(batched, batchFactory); !errors.Is(err, ErrDuplicateEnv) {
		t.Errorf("second RegisterEnvBatch = %v, want ErrDuplicateEnv", err)
	}
	ctx := context.Background()

	// Without a batch factory: n environments run one after the other.
	b, err := NewEnvBatch(ctx, serial, nil, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	resets := []EnvReset{{Env: 2, Seed: 1}}
	steps := []EnvStep{{Env: 0}, {Env: 1}}
	if err := b.Run(ctx, resets, steps); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 || len(resets[0].Obs) != 1 || steps[1].Result.Rewards[0] != 1 {
		t.Errorf("serial batch: len %d, reset %v, step %+v", b.Len(), resets[0].Obs, steps[1].Result)
	}
	if err := b.Run(ctx, nil, []EnvStep{{Env: 3}}); err == nil {
		t.Error("step of environment 3 of 3: no error")
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}

	// With one: it builds the batch.
	if _, err := NewEnvBatch(ctx, batched, nil, 5, nil); err != nil || made != 5 {
		t.Errorf("batch factory: made %d, err %v", made, err)
	}
	if _, err := NewEnvBatch(ctx, "api-test-unknown", nil, 1, nil); !errors.Is(err, ErrUnknownEnv) {
		t.Errorf("unknown name: %v, want ErrUnknownEnv", err)
	}
	if _, err := NewEnvBatch(ctx, serial, nil, 0, nil); err == nil {
		t.Error("0 environments: no error")
	}
}
