package policy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
)

// DefaultHidden are the hidden layer widths used when Config.Hidden is nil:
// two layers of 64, the common PPO baseline for classic-control tasks.
var DefaultHidden = []int{64, 64}

// samplingStream is the PCG stream of the sampling generator ("policy" in
// ASCII). nn uses its own stream for initialisation, so the weights and the
// sampled actions are independent although both derive from Config.Seed.
const samplingStream = 0x706f6c696379

// Config describes a policy: the network's architecture, the seed of its
// initial parameters and of its action sampling, and whether it samples.
type Config struct {
	ObsDim    int         `msgpack:"obs_dim"`    // length of one observation
	ActionDim int         `msgpack:"action_dim"` // number of discrete actions, or continuous dimensions
	Head      nn.HeadKind `msgpack:"head"`       // nn.Categorical or nn.Gaussian
	// Hidden are the hidden layer widths; nil means DefaultHidden. A
	// non-nil empty slice asks for a linear policy with no hidden layer.
	Hidden []int `msgpack:"hidden"`
	// Activation follows every hidden layer; "" means nn.Tanh.
	Activation nn.Activation `msgpack:"activation"`
	// Seed determines the initial parameters (version 0) and the sequence
	// of sampled actions, so equal configs give equal answers.
	Seed int64 `msgpack:"seed"`
	// Deterministic takes the most likely action (the argmax of the logits,
	// or the Gaussian mean) instead of sampling, as for evaluation.
	Deterministic bool `msgpack:"deterministic"`
	// SharedTrunk puts the policy and value heads on one stack of hidden
	// layers (nn.Spec.SharedTrunk): a dueling Q network (algo/dqn), whose
	// logits are advantages and value head V(s), so the deterministic
	// action is the greedy one and the value a state value.
	SharedTrunk bool `msgpack:"shared_trunk"`
	// Threads is how many goroutines the CPU backend may evaluate one
	// batch on, each given at least 64 rows; 0 and 1 mean the calling
	// goroutine alone. The answers are those of one goroutine to float32
	// rounding (see cpuBackend.Act).
	Threads int `msgpack:"threads"`
	// ObsShape is the shape of one observation, [H, W, C] channels last
	// (nn.Spec.InputShape), with H·W·C = ObsDim; nil for a flat vector.
	// ConfigForEnv fills it in for an environment whose observations are
	// three-dimensional. Conv needs it.
	ObsShape []int `msgpack:"obs_shape,omitempty"`
	// Conv are convolutions before the hidden layers (nn.Spec.Conv), for
	// observations that are images; both heads share them. Empty: an MLP.
	Conv []nn.ConvLayer `msgpack:"conv,omitempty"`
	// ActionMask says where one observation marks the available actions
	// (nn.Spec.ActionMask): ConfigForEnv takes it from an environment that
	// has one (api.ActionMasker), such as a board game's legal moves.
	ActionMask []int `msgpack:"action_mask,omitempty"`
}

// MinAtarConv is the convolution of the MinAtar paper's networks (Young &
// Tian 2019): 16 filters of 3×3, stride 1, no padding. With Hidden
// [128], the ReLU activation and a shared trunk it is their actor-critic
// network; with a categorical head and dqn's learner, their DQN.
var MinAtarConv = []nn.ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}}

// WithShape overrides the hidden layers and the activation where a worker's
// configuration gives them: nil hidden and "" activation keep c's.
func (c Config) WithShape(hidden []int, activation nn.Activation) Config {
	if hidden != nil {
		c.Hidden = hidden
	}
	c.Activation = cmp.Or(activation, c.Activation)
	return c
}

// WithConv sets the convolutions where a worker's configuration gives
// them: nil keeps c's, and a non-nil empty slice removes them.
func (c Config) WithConv(conv []nn.ConvLayer) Config {
	if conv != nil {
		c.Conv = slices.Clone(conv)
	}
	return c
}

// Validate reports whether c describes a network that can be built (see
// nn.Spec.Validate) without building it, so that a worker can refuse a bad
// configuration (a convolution larger than the image, say) when it is
// checked, before anything is opened.
// The error names the configuration keys the network comes from.
func (c Config) Validate() error {
	if err := c.spec().Validate(); err != nil {
		return fmt.Errorf("policy: network of obs_shape %v, conv %v, hidden %v: %w", c.ObsShape, c.Conv, c.Hidden, err)
	}
	return nil
}

// clone returns a copy of c that shares no slice with it.
func (c Config) clone() Config {
	c.Hidden = slices.Clone(c.Hidden)
	c.ObsShape = slices.Clone(c.ObsShape)
	c.Conv = slices.Clone(c.Conv)
	c.ActionMask = slices.Clone(c.ActionMask)
	return c
}

// spec returns the network spec of c with the defaults filled in.
func (c Config) spec() nn.Spec {
	s := nn.Spec{
		ObsDim: c.ObsDim, InputShape: slices.Clone(c.ObsShape), Conv: slices.Clone(c.Conv),
		Hidden: slices.Clone(c.Hidden), Activation: c.Activation,
		Head: c.Head, ActionDim: c.ActionDim, SharedTrunk: c.SharedTrunk,
		ActionMask: slices.Clone(c.ActionMask),
	}
	if c.Hidden == nil {
		s.Hidden = slices.Clone(DefaultHidden)
	}
	if s.Activation == "" {
		s.Activation = nn.Tanh
	}
	return s
}

// ErrNoValidAction is wrapped by the error of Infer when a row's output has
// no valid action: its logits or mean are not finite, which (since
// SetParams accepts only finite parameters) means a non-finite or absurdly
// large observation.
var ErrNoValidAction = errors.New("policy: no valid action")

// ActorCritic is an [api.Policy] backed by an [nn.ActorCritic].
//
// It is not safe for concurrent use: Infer reuses one workspace and one
// random generator, and SetParams must not overlap with Infer. A policy
// worker calls all methods from its single loop goroutine.
type ActorCritic struct {
	cfg     Config
	net     *nn.ActorCritic // the parameters, also where the backend is a device
	backend Backend
	version int64
	rng     *rand.Rand

	// Reused by every Infer so that steady-state inference does not allocate.
	acted      Acted // a field: passed to the backend through an interface, a local would escape
	draws      []float64
	mean, lstd []float32
	// shape is scratch for Tensor.Resize's variadic argument, which escapes
	// (it is a method of a generic type) and would otherwise cost an
	// allocation per call.
	shape [2]int
}

var _ api.Policy = (*ActorCritic)(nil)

// New builds the policy described by cfg with version 0 parameters drawn
// from cfg.Seed, evaluated on the CPU.
func New(cfg Config) (*ActorCritic, error) { return NewOn(cfg, nil) }

// NewOn is New with the network evaluated by the backend open returns (nil:
// the CPU). The policy owns the backend: Close releases it. For the same
// config and observations every backend draws the same random numbers, so
// they answer alike up to the rounding of their arithmetic.
func NewOn(cfg Config, open OpenBackend) (*ActorCritic, error) {
	spec := cfg.spec()
	net, err := nn.NewActorCritic(spec, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	cfg.Hidden, cfg.Activation = spec.Hidden, spec.Activation
	var b Backend = newCPUBackend(net, cfg.Threads, true)
	if open != nil {
		if b, err = open(net); err != nil {
			return nil, fmt.Errorf("policy: open backend: %w", err)
		}
	}
	return &ActorCritic{
		cfg:     cfg.clone(),
		net:     net,
		backend: b,
		rng:     rand.New(rand.NewPCG(uint64(cfg.Seed), samplingStream)),
	}, nil
}

// Close releases the backend. A CPU policy holds nothing; closing it is
// optional.
func (p *ActorCritic) Close() error { return p.backend.Close() }

// Config returns the policy's configuration with the defaults filled in.
func (p *ActorCritic) Config() Config { return p.cfg.clone() }

// Net returns the underlying network (not a copy), for code that trains it
// in place. Writes through it do not change Version, and reach a device
// backend only through SetParams; call SetParams to publish a new version.
func (p *ActorCritic) Net() *nn.ActorCritic { return p.net }

// Version returns the version of the current parameters.
func (p *ActorCritic) Version() int64 { return p.version }

// NumParams returns the length of the parameter vector SetParams expects.
func (p *ActorCritic) NumParams() int { return p.net.NumParams() }

// SetParams replaces the parameters by a copy of params and sets the
// version. params must have exactly NumParams elements, all finite; a
// vector that fails either check is rejected and the policy keeps its
// current parameters and version.
func (p *ActorCritic) SetParams(version int64, params []float32) error {
	if len(params) != p.net.NumParams() {
		return fmt.Errorf("policy: set params version %d: got %d values, the network has %d",
			version, len(params), p.net.NumParams())
	}
	// A single NaN would make every answer NaN (or fail), far from the
	// learner that produced it; reject it here where the cause is clear.
	for i, v := range params {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("policy: set params version %d: value %d is %v", version, i, v)
		}
	}
	if err := p.net.SetParams(params); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if err := p.backend.SetParams(params); err != nil {
		return fmt.Errorf("policy: set params version %d: %w", version, err)
	}
	p.version = version
	return nil
}

// Params returns the version and a copy of the parameters.
func (p *ActorCritic) Params() (version int64, params []float32) {
	return p.version, slices.Clone(p.net.Params())
}

// Infer computes one action per row of obs ([B, ObsDim], or [B, ObsShape...]
// for a policy with ObsShape) in a single forward pass. For a categorical head it fills out.Actions ([B]) and
// clears out.ContActions; for a Gaussian head it fills out.ContActions
// ([B, ActionDim]), unclipped, and clears out.Actions. LogProbs and Values
// are [B], and out.Version is the parameter version. out's tensors are
// resized in place, so reusing one Inference avoids allocation.
//
// B may be 0. On error out's contents are unspecified.
func (p *ActorCritic) Infer(obs api.Tensor[float32], out *api.Inference) error {
	if out == nil {
		return errors.New("policy: infer: nil output")
	}
	if err := obs.Validate(); err != nil {
		return fmt.Errorf("policy: infer: observations: %w", err)
	}
	if !p.obsShapeOK(obs.Shape) {
		want := fmt.Sprintf("[batch %d]", p.cfg.ObsDim)
		if p.cfg.ObsShape != nil {
			want += fmt.Sprintf(" or [batch %s]", strings.Trim(fmt.Sprint(p.cfg.ObsShape), "[]"))
		}
		return fmt.Errorf("policy: infer: observations have shape %v, want %s", obs.Shape, want)
	}
	b, a := obs.Shape[0], p.cfg.ActionDim
	gaussian := p.cfg.Head == nn.Gaussian
	var err error
	p.shape = [2]int{b, a}
	rows := p.shape[:1]
	if gaussian {
		setAbsent(&out.Actions)
		err = out.ContActions.Resize(p.shape[:]...)
	} else {
		setAbsent(&out.ContActions)
		err = out.Actions.Resize(rows...)
	}
	if err == nil {
		err = out.LogProbs.Resize(rows...)
	}
	if err == nil {
		err = out.Values.Resize(rows...)
	}
	if err != nil {
		return fmt.Errorf("policy: infer: %w", err)
	}
	out.Version = p.version
	if b == 0 {
		return nil // nn rejects an empty batch; there is nothing to compute
	}
	acted := &p.acted
	*acted = Acted{Values: out.Values.Data}
	deterministic := p.cfg.Deterministic
	var draws []float64 // nil: greedy, or a Gaussian head
	if gaussian {
		p.mean, p.lstd = grow(p.mean, b*a), grow(p.lstd, a)
		acted.Mean, acted.LogStd = p.mean, p.lstd
	} else {
		acted.Actions, acted.LogProbs = out.Actions.Data, out.LogProbs.Data
		if !deterministic {
			// One draw per row, in row order, whatever the backend: the
			// same seed gives the same actions on the CPU and a GPU.
			p.draws = grow(p.draws, b)
			for i := range p.draws {
				p.draws[i] = p.rng.Float64()
			}
			draws = p.draws
		}
	}
	if err := p.backend.Act(obs.Data, b, draws, acted); err != nil {
		return fmt.Errorf("policy: infer: %w", err)
	}
	for i := range b {
		lp := out.LogProbs.Data[i]
		if gaussian {
			row := i * a
			mean, act := p.mean[row:row+a], out.ContActions.Data[row:row+a]
			if deterministic {
				copy(act, mean)
				lp = nn.GaussianLogProb(mean, p.lstd, act)
			} else {
				lp = nn.SampleGaussian(mean, p.lstd, p.rng, act)
			}
			// The log-density does not depend on the mean, so an infinite
			// mean shows only in the action.
			if !api.AllFinite(act) {
				lp = float32(math.NaN())
			}
			out.LogProbs.Data[i] = lp
		}
		// A NaN log-probability is how the heads report a row without a
		// valid action (an action of -1, or a NaN Gaussian draw).
		if math.IsNaN(float64(lp)) {
			return fmt.Errorf("%w for row %d: the network output is not finite (check the observation)", ErrNoValidAction, i)
		}
	}
	return nil
}

// obsShapeOK reports whether a batch of observations has the shape Infer
// takes: [B, ObsDim], or [B, ObsShape...] (the same values, row-major, as
// an environment with image observations produces them).
func (p *ActorCritic) obsShapeOK(shape []int) bool {
	if len(shape) == 2 && shape[1] == p.cfg.ObsDim {
		return true
	}
	return len(shape) >= 2 && p.cfg.ObsShape != nil && slices.Equal(shape[1:], p.cfg.ObsShape)
}

// grow returns s resliced to n elements, reallocating only if its capacity
// is too small. The contents are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// setAbsent makes t the zero (absent) tensor but keeps its storage, so that
// a later Resize can reuse it if the Inference is reused by another policy.
func setAbsent[T api.Numeric](t *api.Tensor[T]) {
	t.Shape = nil
	t.Data = t.Data[:0]
}
