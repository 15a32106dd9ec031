package nn_test

import (
	"errors"
	"math"
	"testing"

	"github.com/distrl/distrl/nn"
)

func TestSpecValidate(t *testing.T) {
	ok := nn.Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}
	gauss := nn.Spec{ObsDim: 3, Hidden: []int{8}, Activation: nn.ReLU, Head: nn.Gaussian, ActionDim: 1, InitLogStd: -0.5}
	tests := []struct {
		name    string
		edit    func(s *nn.Spec)
		base    nn.Spec
		wantErr bool
	}{
		{"cartpole", func(*nn.Spec) {}, ok, false},
		{"gaussian", func(*nn.Spec) {}, gauss, false},
		{"no hidden layers", func(s *nn.Spec) { s.Hidden = nil }, ok, false},
		{"shared trunk", func(s *nn.Spec) { s.SharedTrunk = true }, ok, false},
		{"zero obs", func(s *nn.Spec) { s.ObsDim = 0 }, ok, true},
		{"negative hidden", func(s *nn.Spec) { s.Hidden = []int{64, -1} }, ok, true},
		{"zero hidden", func(s *nn.Spec) { s.Hidden = []int{0} }, ok, true},
		{"unknown activation", func(s *nn.Spec) { s.Activation = "sigmoid" }, ok, true},
		{"empty activation", func(s *nn.Spec) { s.Activation = "" }, ok, true},
		{"unknown head", func(s *nn.Spec) { s.Head = "beta" }, ok, true},
		{"zero actions", func(s *nn.Spec) { s.ActionDim = 0 }, ok, true},
		{"logstd on categorical", func(s *nn.Spec) { s.InitLogStd = 1 }, ok, true},
		{"nan logstd", func(s *nn.Spec) { s.InitLogStd = float32(math.NaN()) }, gauss, true},
		{"inf logstd", func(s *nn.Spec) { s.InitLogStd = float32(math.Inf(1)) }, gauss, true},
		{"huge layer", func(s *nn.Spec) { s.Hidden = []int{1 << 20, 1 << 20} }, ok, true},
		{"action mask", func(s *nn.Spec) { s.ActionMask = []int{3, 0} }, ok, false},
		{"action mask of one action too few", func(s *nn.Spec) { s.ActionMask = []int{3} }, ok, true},
		{"action mask outside the observation", func(s *nn.Spec) { s.ActionMask = []int{0, 4} }, ok, true},
		{"action mask on a gaussian head", func(s *nn.Spec) { s.ActionMask = []int{0} }, gauss, true},
		{"overflowing layer", func(s *nn.Spec) { s.ObsDim = math.MaxInt; s.Hidden = []int{math.MaxInt} }, ok, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.base
			s.Hidden = append([]int(nil), s.Hidden...)
			tt.edit(&s)
			err := s.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error: %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, nn.ErrInvalidSpec) {
				t.Errorf("error %v does not wrap ErrInvalidSpec", err)
			}
			if _, nerr := nn.NewActorCritic(s, 1); (nerr != nil) != tt.wantErr {
				t.Errorf("NewActorCritic error = %v, want error: %v", nerr, tt.wantErr)
			}
		})
	}
}
