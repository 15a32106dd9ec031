package policy_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/vmihailenco/msgpack/v5"
)

// imageEnv is an environment whose observations are 4×5×3 images, as
// MinAtar's are 10×10×n.
type imageEnv struct{}

func (imageEnv) Reset(int64) ([][]float32, error)    { return [][]float32{make([]float32, 60)}, nil }
func (imageEnv) Step([]api.Action) (api.Step, error) { return api.Step{}, api.ErrNeedsReset }
func (imageEnv) ObservationSpace() api.Space         { return api.NewBox(0, 1, 4, 5, 3) }
func (imageEnv) ActionSpace() api.Space              { return api.NewDiscrete(6) }
func (imageEnv) Agents() []string                    { return []string{"agent_0"} }
func (imageEnv) Close() error                        { return nil }

func init() {
	if err := api.RegisterEnv("policytest/image", func(map[string]any) (api.Env, error) { return imageEnv{}, nil }); err != nil {
		panic(err)
	}
}

// small is a conv policy small enough for the race detector.
var small = policy.Config{ObsDim: 60, ObsShape: []int{4, 5, 3}, ActionDim: 6, Head: nn.Categorical,
	Conv: []nn.ConvLayer{{Filters: 4, Kernel: 3, Stride: 1, Padding: 1}}, Hidden: []int{32}, Activation: nn.ReLU, Seed: 3}

// TestConvConfig: the conv fields reach the network, with the defaults of
// the other fields, and Config hands out copies.
func TestConvConfig(t *testing.T) {
	p := newPolicy(t, small)
	spec := p.Net().Spec()
	if !slices.Equal(spec.InputShape, small.ObsShape) || !slices.Equal(spec.Conv, small.Conv) || !slices.Equal(spec.Hidden, small.Hidden) {
		t.Fatalf("network spec %+v from config %+v", spec, small)
	}
	c := p.Config()
	c.Conv[0].Filters, c.ObsShape[0] = 99, 99
	if got := p.Config(); got.Conv[0].Filters != 4 || got.ObsShape[0] != 4 {
		t.Error("Config aliases the policy's conv layers or observation shape")
	}
	minAtar := policy.Config{ObsDim: 400, ObsShape: []int{10, 10, 4}, ActionDim: 6, Head: nn.Categorical,
		Conv: policy.MinAtarConv, Hidden: []int{128}, Activation: nn.ReLU, SharedTrunk: true}
	names := []string{}
	for _, info := range newPolicy(t, minAtar).Net().Layout() {
		names = append(names, info.Name)
	}
	if want := []string{"conv.0.w", "conv.0.b", "trunk.0.w", "trunk.0.b", "pi.0.w", "pi.0.b", "v.0.w", "v.0.b"}; !slices.Equal(names, want) {
		t.Errorf("MinAtar's network: %v, want %v", names, want)
	}
}

func TestConvConfigRejected(t *testing.T) {
	for name, edit := range map[string]func(*policy.Config){
		"conv without shape":     func(c *policy.Config) { c.ObsShape = nil },
		"shape against obs dim":  func(c *policy.Config) { c.ObsShape = []int{4, 5, 2} },
		"kernel larger than obs": func(c *policy.Config) { c.Conv = []nn.ConvLayer{{Filters: 2, Kernel: 5, Stride: 1}} },
		"zero stride":            func(c *policy.Config) { c.Conv = []nn.ConvLayer{{Filters: 2, Kernel: 3}} },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := small
			edit(&cfg)
			if _, err := policy.New(cfg); !errors.Is(err, nn.ErrInvalidSpec) {
				t.Errorf("New: %v, want nn.ErrInvalidSpec", err)
			}
		})
	}
}

// TestConvConfigWire: a config with convolutions survives msgpack, the
// encoding of configs and checkpoints, under its documented keys.
func TestConvConfigWire(t *testing.T) {
	wire, err := msgpack.Marshal(small)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := msgpack.Unmarshal(wire, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["conv"]; !ok {
		t.Errorf("no conv key in %v", keys)
	}
	if _, ok := keys["obs_shape"]; !ok {
		t.Errorf("no obs_shape key in %v", keys)
	}
	var got policy.Config
	if err := msgpack.Unmarshal(wire, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, small) {
		t.Fatalf("round trip: %+v, want %+v", got, small)
	}
	// An MLP's config has neither key, as before convolutions existed.
	wire, _ = msgpack.Marshal(cartPole)
	clear(keys)
	_ = msgpack.Unmarshal(wire, &keys)
	if _, ok := keys["conv"]; ok {
		t.Errorf("an MLP config carries conv: %v", keys)
	}
}

func TestConfigWithConv(t *testing.T) {
	conv := []nn.ConvLayer{{Filters: 2, Kernel: 2, Stride: 2}}
	if got := small.WithConv(nil); !slices.Equal(got.Conv, small.Conv) {
		t.Errorf("nil conv replaced the config's: %v", got.Conv)
	}
	got := small.WithConv(conv)
	conv[0].Filters = 9
	if !reflect.DeepEqual(got.Conv, []nn.ConvLayer{{Filters: 2, Kernel: 2, Stride: 2}}) {
		t.Errorf("WithConv: %v (must copy)", got.Conv)
	}
	if got := small.WithConv([]nn.ConvLayer{}); len(got.Conv) != 0 {
		t.Errorf("empty conv kept %v", got.Conv)
	}
}

// TestConfigForImageEnv: a three-dimensional observation space gives
// ObsShape, to which a configuration adds convolutions.
func TestConfigForImageEnv(t *testing.T) {
	cfg, err := policy.ConfigForEnv("policytest/image", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ObsDim != 60 || !slices.Equal(cfg.ObsShape, []int{4, 5, 3}) || len(cfg.Conv) != 0 || cfg.Head != nn.Categorical {
		t.Fatalf("ConfigForEnv: %+v", cfg)
	}
	newPolicy(t, cfg) // an MLP over the image
	p := newPolicy(t, cfg.WithConv(policy.MinAtarConv).WithShape([]int{16}, nn.ReLU))
	if spec := p.Net().Spec(); len(spec.Conv) != 1 || !slices.Equal(spec.InputShape, []int{4, 5, 3}) {
		t.Errorf("network %+v", spec)
	}
	// Flat observation spaces get no shape.
	if cfg, _ := policy.ConfigForEnv("policytest/box", nil); cfg.ObsShape != nil {
		t.Errorf("a 2-D box gave ObsShape %v", cfg.ObsShape)
	}
}

// TestInferImageShapes: a conv policy takes its observations as
// [B, ObsDim] or [B, H, W, C], with the same answers, and refuses other
// shapes of the same size.
func TestInferImageShapes(t *testing.T) {
	// Two equal policies: sampling advances a policy's generator, so each
	// shape gets a fresh one.
	p, q := newPolicy(t, small), newPolicy(t, small)
	params := randomParams(p)
	for _, x := range []*policy.ActorCritic{p, q} {
		if err := x.SetParams(1, params); err != nil {
			t.Fatal(err)
		}
	}
	flat := randObs(1, 5, 60)
	image := api.Tensor[float32]{Shape: []int{5, 4, 5, 3}, Data: flat.Data}
	a, c := infer(t, p, flat), infer(t, q, image)
	if !slices.Equal(a.Actions.Data, c.Actions.Data) || !slices.Equal(a.Values.Data, c.Values.Data) {
		t.Error("image-shaped observations gave other answers than flat ones")
	}
	var out api.Inference
	for _, shape := range [][]int{{5, 5, 4, 3}, {5, 20, 3}, {5, 60, 1}} {
		bad := api.Tensor[float32]{Shape: shape, Data: flat.Data}
		if err := p.Infer(bad, &out); err == nil {
			t.Errorf("Infer accepted shape %v", shape)
		}
	}
}

// randomParams returns parameters of unit-ish scale for p's network, so
// that its actions differ between rows.
func randomParams(p *policy.ActorCritic) []float32 {
	_, params := p.Params()
	obs := randObs(99, 1, len(params))
	copy(params, obs.Data)
	for i := range params {
		params[i] *= 0.3
	}
	return params
}
