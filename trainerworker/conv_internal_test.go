package trainerworker

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/vmihailenco/msgpack/v5"
)

func args(t *testing.T, kwargs map[string]any) rpc.Args {
	t.Helper()
	raw, err := msgpack.Marshal(kwargs)
	if err != nil {
		t.Fatal(err)
	}
	return rpc.RawArgs(raw)
}

// TestConfigConv: both algorithms build the MinAtar paper's network from
// conv, hidden and (PPO) shared_trunk, and the configure-time check
// refuses a bad convolution with a bad_arguments error naming conv.
func TestConfigConv(t *testing.T) {
	conv := []map[string]any{{"filters": 16, "kernel": 3, "stride": 1}}
	s, err := parseConfig(args(t, map[string]any{"env": "minatar-breakout", "conv": conv, "hidden": []int{128}, "shared_trunk": true}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.policy.Conv, policy.MinAtarConv) || !s.policy.SharedTrunk || !slices.Equal(s.policy.ObsShape, []int{10, 10, 4}) {
		t.Errorf("ppo: policy config %+v, want the MinAtar conv on [10 10 4] with a shared trunk", s.policy)
	}
	_, _, pc, err := parseDQNConfig(args(t, map[string]any{"algorithm": "dqn", "env": "minatar-breakout", "conv": conv, "hidden": []int{128}}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pc.Conv, policy.MinAtarConv) {
		t.Errorf("dqn: policy config %+v, want the MinAtar conv", pc)
	}
	big := []map[string]any{{"filters": 16, "kernel": 12, "stride": 1}}
	for _, algo := range []string{AlgoPPO, AlgoDQN} {
		err := CheckConfig(args(t, map[string]any{"algorithm": algo, "env": "minatar-breakout", "conv": big}), 0)
		if !errors.Is(err, rpc.ErrBadArguments) || !strings.Contains(err.Error(), "conv") {
			t.Errorf("%s: CheckConfig of a kernel larger than the image = %v, want bad_arguments naming conv", algo, err)
		}
	}
}

// TestConfigHashConv: the hash of a network without convolutions is what
// it was before they existed (checkpoints written then still resume), and
// the input shape and the convolutions are part of a conv network's hash.
func TestConfigHashConv(t *testing.T) {
	mlp := nn.Spec{ObsDim: 4, Hidden: []int{64, 64}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}
	// Golden: the hash of this spec before InputShape and Conv were added.
	if got, want := configHash("default", mlp), "7e9ac78c9b84ed80"; got != want {
		t.Errorf("configHash of an MLP = %s, want %s (checkpoints of MLPs would no longer resume)", got, want)
	}
	image := nn.Spec{ObsDim: 400, InputShape: []int{10, 10, 4}, Hidden: []int{128}, Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 6}
	conv := image
	conv.Conv = []nn.ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}}
	wider := conv
	wider.Conv = []nn.ConvLayer{{Filters: 32, Kernel: 3, Stride: 1}}
	flat := image
	flat.InputShape = nil
	seen := map[string]string{}
	for name, s := range map[string]nn.Spec{"flat": flat, "image": image, "conv": conv, "wider": wider} {
		h := configHash("default", s)
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s have the same hash %s", name, other, h)
		}
		seen[h] = name
	}
}

// TestObsFits: a PPO batch's observations may come flat or in the
// network's input shape, nothing else.
func TestObsFits(t *testing.T) {
	spec := nn.Spec{ObsDim: 400, InputShape: []int{10, 10, 4}}
	for _, tt := range []struct {
		shape []int
		want  bool
	}{
		{[]int{400}, true}, {[]int{10, 10, 4}, true}, {[]int{20, 5, 4}, false}, {[]int{399}, false}, {[]int{10, 40}, false},
	} {
		if got := obsFits(tt.shape, spec); got != tt.want {
			t.Errorf("obsFits(%v) = %v, want %v", tt.shape, got, tt.want)
		}
	}
	if obsFits([]int{2, 2}, nn.Spec{ObsDim: 4}) {
		t.Error("a [2, 2] observation fits a network without an input shape")
	}
}
