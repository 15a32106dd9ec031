package api

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// stubEnv is the smallest Env, for registry tests.
type stubEnv struct{ closed bool }

func (e *stubEnv) Reset(int64) ([][]float32, error) { return [][]float32{{0}}, nil }
func (e *stubEnv) Step([]Action) (Step, error)      { return Step{}, nil }
func (e *stubEnv) ObservationSpace() Space          { return NewBox(0, 1, 1) }
func (e *stubEnv) ActionSpace() Space               { return NewDiscrete(2) }
func (e *stubEnv) Agents() []string                 { return []string{"agent_0"} }
func (e *stubEnv) Close() error                     { e.closed = true; return nil }

func TestEnvRegistry(t *testing.T) {
	// The registry is global; use names no other test registers, and take
	// them out again so the test can run more than once (-count).
	const name = "api-test-stub"
	t.Cleanup(func() {
		registry.mu.Lock()
		defer registry.mu.Unlock()
		delete(registry.factories, name)
		delete(registry.factories, "api-test-returns-nil")
	})
	factory := func(cfg map[string]any) (Env, error) {
		if err := Config(cfg).CheckKeys("ok"); err != nil {
			return nil, err
		}
		return &stubEnv{}, nil
	}
	if err := RegisterEnv(name, factory); err != nil {
		t.Fatal(err)
	}
	if err := RegisterEnv(name, factory); !errors.Is(err, ErrDuplicateEnv) {
		t.Errorf("second RegisterEnv = %v, want ErrDuplicateEnv", err)
	}
	if err := RegisterEnv("", factory); err == nil {
		t.Error("RegisterEnv with an empty name succeeded")
	}
	if err := RegisterEnv("api-test-nil", nil); err == nil {
		t.Error("RegisterEnv with a nil factory succeeded")
	}
	if err := RegisterEnv("api-test-returns-nil", func(map[string]any) (Env, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}

	if !slices.Contains(EnvNames(), name) || !slices.IsSorted(EnvNames()) {
		t.Errorf("EnvNames() = %v, want sorted and containing %q", EnvNames(), name)
	}
	if e, err := NewEnv(name, nil); err != nil || e == nil {
		t.Errorf("NewEnv(%q) = %v, %v", name, e, err)
	}
	if _, err := NewEnv(name, map[string]any{"bad": 1}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("NewEnv with a bad key = %v, want an error naming it", err)
	}
	if _, err := NewEnv("api-test-returns-nil", nil); err == nil {
		t.Error("NewEnv accepted a factory returning nil")
	}
	_, err := NewEnv("no-such-env", nil)
	if !errors.Is(err, ErrUnknownEnv) || !strings.Contains(err.Error(), name) {
		t.Errorf("NewEnv(unknown) = %v, want ErrUnknownEnv listing %q", err, name)
	}
}

func TestStepDone(t *testing.T) {
	tests := []struct {
		s    Step
		want bool
	}{
		{Step{Terminated: []bool{false, false}, Truncated: []bool{false, false}}, false},
		{Step{Terminated: []bool{false, true}, Truncated: []bool{false, false}}, true},
		{Step{Terminated: []bool{false}, Truncated: []bool{true}}, true},
		{Step{}, false},
	}
	for _, tc := range tests {
		if got := tc.s.Done(); got != tc.want {
			t.Errorf("%+v.Done() = %v, want %v", tc.s, got, tc.want)
		}
	}
}
