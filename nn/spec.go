package nn

import (
	"errors"
	"fmt"
	"math"
)

// Activation names the nonlinearity applied after every hidden layer.
type Activation string

// Supported activations.
const (
	Tanh Activation = "tanh"
	ReLU Activation = "relu"
)

// HeadKind names the action distribution the policy head parameterises.
type HeadKind string

// Supported policy heads.
const (
	// Categorical heads output one logit per discrete action.
	Categorical HeadKind = "categorical"
	// Gaussian heads output the mean of a diagonal Gaussian; its log standard
	// deviation is a state-independent parameter vector, as in common PPO
	// implementations for continuous control.
	Gaussian HeadKind = "gaussian"
)

// maxParams bounds the size of a network. These networks are meant to be
// small; the bound mostly keeps a corrupt spec (for example one decoded from
// the wire) from overflowing offsets or allocating gigabytes.
const maxParams = 1 << 28

// Spec describes the architecture of an ActorCritic.
type Spec struct {
	ObsDim int // length of one observation

	// InputShape is the shape of one observation as [H, W, C], channels
	// last (the observation's flat index is (y·W + x)·C + c), with
	// H·W·C = ObsDim. It is required by Conv and may be given without it,
	// as a record of the observation's shape; nil means a flat vector.
	InputShape []int
	// Conv are 2-D convolutions applied to the observation, in order,
	// before the dense layers, each followed by Activation. Their output,
	// flattened in the same (y, x, channel) order, is the input of the
	// dense layers. They form one trunk that the policy and value heads
	// share whatever SharedTrunk says (see SharedTrunk). Empty: an MLP.
	Conv []ConvLayer

	Hidden     []int      // widths of the hidden layers, e.g. [64, 64]; may be empty
	Activation Activation // nonlinearity after each hidden and convolutional layer
	Head       HeadKind   // policy distribution
	ActionDim  int        // number of discrete actions, or continuous action dimensions

	// SharedTrunk makes policy and value heads sit on one common stack of
	// hidden layers. The default (false) gives each its own MLP, as common
	// PPO baselines do, so the value loss cannot disturb policy features.
	//
	// It does not apply to Conv, which both heads always share: the
	// convolutions are most of a pixel network's cost, which separate
	// copies would double, and the networks this package is meant to
	// reproduce (MinAtar's, Atari's Nature CNN in PPO baselines) share
	// them. MinAtar's actor-critic network shares the dense layer too:
	// Conv [{16, 3, 1, 0}], Hidden [128], SharedTrunk true.
	SharedTrunk bool

	// ActionMask, for a categorical head, lets the observation say which
	// actions are available: action i is where obs[ActionMask[i]] > 0.5,
	// as a board game marks its legal moves. Forward gives the others the
	// logit MaskedLogit, so that sampling, the greedy action, the
	// log-probabilities, the entropy and their gradients leave them out.
	// nil: every action is available.
	ActionMask []int

	// InitLogStd is the initial value of every log standard deviation of a
	// Gaussian head (0 means std 1). It must be zero for categorical heads so
	// that a spec carries no setting that silently does nothing.
	InitLogStd float32
}

// ErrInvalidSpec is wrapped by every error Spec.Validate returns.
var ErrInvalidSpec = errors.New("nn: invalid spec")

// Validate reports whether s describes a network this package can build.
func (s Spec) Validate() error {
	if s.ObsDim <= 0 {
		return fmt.Errorf("%w: ObsDim must be positive, got %d", ErrInvalidSpec, s.ObsDim)
	}
	convs, err := s.convGeometry()
	if err != nil {
		return err
	}
	for i, h := range s.Hidden {
		if h <= 0 {
			return fmt.Errorf("%w: Hidden[%d] must be positive, got %d", ErrInvalidSpec, i, h)
		}
	}
	switch s.Activation {
	case Tanh, ReLU:
	default:
		return fmt.Errorf("%w: unknown activation %q (want %q or %q)", ErrInvalidSpec, s.Activation, Tanh, ReLU)
	}
	switch s.Head {
	case Categorical:
		if s.InitLogStd != 0 {
			return fmt.Errorf("%w: InitLogStd is only meaningful for a %q head", ErrInvalidSpec, Gaussian)
		}
	case Gaussian:
		if f := float64(s.InitLogStd); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: InitLogStd must be finite, got %v", ErrInvalidSpec, s.InitLogStd)
		}
	default:
		return fmt.Errorf("%w: unknown head %q (want %q or %q)", ErrInvalidSpec, s.Head, Categorical, Gaussian)
	}
	if s.ActionDim <= 0 {
		return fmt.Errorf("%w: ActionDim must be positive, got %d", ErrInvalidSpec, s.ActionDim)
	}
	if s.ActionMask != nil {
		if s.Head != Categorical || len(s.ActionMask) != s.ActionDim {
			return fmt.Errorf("%w: ActionMask needs a %q head and one index per action: %d indices for %d %s actions",
				ErrInvalidSpec, Categorical, len(s.ActionMask), s.ActionDim, s.Head)
		}
		for i, at := range s.ActionMask {
			if at < 0 || at >= s.ObsDim {
				return fmt.Errorf("%w: ActionMask[%d] = %d is outside the observation (%d values)", ErrInvalidSpec, i, at, s.ObsDim)
			}
		}
	}
	// Count in a way that cannot overflow even with a 32-bit int: each layer
	// is checked against the room left before anything is multiplied.
	n := 0
	add := func(in, out int) bool {
		if out > maxParams-n || in > (maxParams-n-out)/out {
			return false
		}
		n += in*out + out
		return true
	}
	ok := true
	features := s.ObsDim
	for _, g := range convs {
		ok = ok && add(g.cols(), g.outC)
		features = g.outSize()
	}
	if s.SharedTrunk {
		in := features
		for _, h := range s.Hidden {
			ok = ok && add(in, h)
			in = h
		}
		ok = ok && add(in, s.ActionDim) && add(in, 1)
	} else {
		for _, outDim := range []int{s.ActionDim, 1} {
			in := features
			for _, h := range s.Hidden {
				ok = ok && add(in, h)
				in = h
			}
			ok = ok && add(in, outDim)
		}
	}
	if ok && s.Head == Gaussian {
		ok = s.ActionDim <= maxParams-n
	}
	if !ok {
		return fmt.Errorf("%w: network has more than %d parameters", ErrInvalidSpec, maxParams)
	}
	return nil
}

// clone returns a copy of s that shares no memory with it, so a model's
// spec cannot be changed through a slice the caller still holds.
func (s Spec) clone() Spec {
	s.Hidden = append([]int(nil), s.Hidden...)
	if s.InputShape != nil {
		s.InputShape = append([]int(nil), s.InputShape...)
	}
	if s.Conv != nil {
		s.Conv = append([]ConvLayer(nil), s.Conv...)
	}
	if s.ActionMask != nil {
		s.ActionMask = append([]int(nil), s.ActionMask...)
	}
	return s
}

// MaskedLogit is the logit of an action the observation makes unavailable
// (Spec.ActionMask): far enough below any real logit that its probability
// is 0 in float32 and float64, finite so that no Inf-Inf or 0·Inf turns
// into NaN.
const MaskedLogit = -1e9

// MaskLogits gives the unavailable actions of each of batch rows of obs
// the logit MaskedLogit in logits ([batch, ActionDim]); nothing without
// an ActionMask. A row with no available action keeps its logits.
func (s Spec) MaskLogits(obs, logits []float32, batch int) {
	if s.ActionMask == nil {
		return
	}
	a := s.ActionDim
	for r := range batch {
		row, o := logits[r*a:(r+1)*a], obs[r*s.ObsDim:(r+1)*s.ObsDim]
		avail := false
		for _, at := range s.ActionMask {
			avail = avail || o[at] > 0.5
		}
		if !avail {
			continue
		}
		for i, at := range s.ActionMask {
			if o[at] <= 0.5 {
				row[i] = MaskedLogit
			}
		}
	}
}

// ParamInfo locates one parameter tensor inside the flat parameter vector.
//
// Names are "<net>.<layer>.w" and "<net>.<layer>.b" with net one of "conv"
// (convolutions), "pi" (policy), "v" (value) or "trunk" (shared hidden
// layers), layers numbered from 0 in forward order, plus "logstd" for a
// Gaussian head. Storage order is conv, trunk, pi, v, logstd. With
// separate trunks "pi" and "v" hold all their dense layers, the last being
// the head; with a shared trunk "trunk" holds the hidden layers and "pi.0"
// and "v.0" are the heads. Dense weights have Shape [in, out] and are
// stored row-major; biases have Shape [out].
//
// A convolution's weights have Shape [Kernel, Kernel, Cin, Filters],
// row-major: element (ky, kx, c, f) weighs input channel c at kernel
// offset (ky, kx) for filter f. That is a dense [Kernel·Kernel·Cin,
// Filters] matrix whose rows are in the order im2col lays out a patch,
// so one GEMM applies it to every patch of a batch.
type ParamInfo struct {
	Name   string
	Shape  []int
	Offset int // index of the first element in the flat vector
}

// Size returns the number of elements of the tensor.
func (p ParamInfo) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}
