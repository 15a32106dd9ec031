package nn

import (
	"errors"
	"fmt"
)

// Engine is where a learner's arithmetic runs: one network's parameters,
// their gradient and their Adam state live on the engine's device, which
// runs the forward and backward passes, the clipping and the optimizer
// step. What crosses between the learner and the engine is what the
// learner needs on its side: observations in, the network's outputs out,
// their gradient (the loss's, which the learner computes) in, and the
// parameters out when it publishes or checkpoints them.
//
// The CPU engine (NewCPUEngine) is this package's own code; package
// nn/cuda has a GPU engine (build tag cuda). An Engine is used from one
// goroutine at a time.
type Engine interface {
	// Forward evaluates batch rows of obs into out (Logits and Values; a
	// Gaussian head is not for engines) and keeps the activations in slot
	// (0, 1, ...) for a Backward.
	Forward(slot int, obs []float32, batch int, out *Output) error
	// Stage keeps rows observations ([rows*ObsDim]) on the engine, an
	// update's, which ForwardRows then draws minibatches from: they cross
	// once, not once an epoch. A later Stage replaces them.
	Stage(obs []float32, rows int) error
	// ForwardRows is Forward of the staged rows idx, in that order.
	ForwardRows(slot int, idx []int32, out *Output) error
	// Backward adds to the engine's gradient that of a loss whose gradient
	// with respect to the outputs of slot's last Forward is dOut (Logits,
	// Values; an empty slice is zero), as ActorCritic.Backward.
	Backward(slot int, batch int, dOut *Output) error
	// ZeroGrad zeroes the gradient.
	ZeroGrad() error
	// Grad copies the gradient into dst and SetGrad replaces it by src
	// ([NumParams] each), for a group's all-reduce.
	Grad(dst []float32) error
	SetGrad(src []float32) error
	// ClipGradNorm returns the gradient's norm and scales the gradient so
	// that its norm is at most maxNorm, as ClipGradNorm does (maxNorm <= 0:
	// never; a non-finite norm is returned and nothing scaled).
	ClipGradNorm(maxNorm float32) (float32, error)
	// Step applies one step of the engine's Adam with learning rate lr to
	// the parameters, as Adam.Update does.
	Step(lr float32) error
	// Params copies the parameters into dst; SetParams replaces them.
	Params(dst []float32) error
	SetParams(src []float32) error
	// AdamState copies Adam's moments into m and v and returns its step;
	// SetAdamState replaces them.
	AdamState(m, v []float32) (int64, error)
	SetAdamState(m, v []float32, step int64) error
	// Close releases the device's resources.
	Close() error
}

// OpenEngine opens an engine for a copy of net's spec and parameters and
// of opt's hyperparameters and state.
type OpenEngine func(net *ActorCritic, opt *Adam) (Engine, error)

// ErrEngineHead is wrapped by an engine's refusal of a Gaussian head.
var ErrEngineHead = errors.New("nn: engines run categorical heads only")

// NewCPUEngine is the Engine of this package: the reference the other
// engines are tested against, and what a learner's engine path runs on
// without a device.
func NewCPUEngine(net *ActorCritic, opt *Adam) (Engine, error) {
	if net.spec.Head != Categorical {
		return nil, fmt.Errorf("%w: got %q", ErrEngineHead, net.spec.Head)
	}
	if n := net.NumParams(); len(opt.M) != n || len(opt.V) != n {
		return nil, fmt.Errorf("nn: engine: %w: an optimizer of %d and %d moments for %d parameters", ErrShape, len(opt.M), len(opt.V), n)
	}
	a := *opt
	a.M, a.V = append([]float32(nil), opt.M...), append([]float32(nil), opt.V...)
	return &cpuEngine{net: net.Clone(), opt: &a, grad: make([]float32, net.NumParams())}, nil
}

type cpuEngine struct {
	net    *ActorCritic
	opt    *Adam
	grad   []float32
	slots  []Workspace
	staged []float32 // Stage's rows
	rows   []float32 // ForwardRows's gathered minibatch
}

func (e *cpuEngine) slot(i int) *Workspace {
	for len(e.slots) <= i {
		e.slots = append(e.slots, Workspace{})
	}
	return &e.slots[i]
}

func (e *cpuEngine) Forward(slot int, obs []float32, batch int, out *Output) error {
	return e.net.Forward(obs, batch, e.slot(slot), out)
}

func (e *cpuEngine) Stage(obs []float32, rows int) error {
	if d := e.net.spec.ObsDim; rows < 0 || len(obs) != rows*d {
		return fmt.Errorf("nn: engine stage: %w: %d values for %d rows of %d", ErrShape, len(obs), rows, d)
	}
	e.staged = append(e.staged[:0], obs...)
	return nil
}

func (e *cpuEngine) ForwardRows(slot int, idx []int32, out *Output) error {
	d := e.net.spec.ObsDim
	e.rows = grow(e.rows, len(idx)*d)
	for i, r := range idx {
		if r < 0 || int(r)*d >= len(e.staged) {
			return fmt.Errorf("nn: engine forward: row %d of %d staged", r, len(e.staged)/d)
		}
		copy(e.rows[i*d:(i+1)*d], e.staged[int(r)*d:])
	}
	return e.Forward(slot, e.rows, len(idx), out)
}

func (e *cpuEngine) Backward(slot int, batch int, dOut *Output) error {
	return e.net.Backward(e.slot(slot), batch, dOut, e.grad)
}

func (e *cpuEngine) ZeroGrad() error { clear(e.grad); return nil }

func (e *cpuEngine) Grad(dst []float32) error { return copyExact("grad", dst, e.grad) }

func (e *cpuEngine) SetGrad(src []float32) error { return copyExact("set grad", e.grad, src) }

func (e *cpuEngine) ClipGradNorm(maxNorm float32) (float32, error) {
	return ClipGradNorm(e.grad, maxNorm), nil
}

func (e *cpuEngine) Step(lr float32) error {
	e.opt.LR = lr
	return e.opt.Update(e.net.params, e.grad)
}

func (e *cpuEngine) Params(dst []float32) error { return copyExact("params", dst, e.net.params) }

func (e *cpuEngine) SetParams(src []float32) error { return e.net.SetParams(src) }

func (e *cpuEngine) AdamState(m, v []float32) (int64, error) {
	if err := copyExact("adam state", m, e.opt.M); err != nil {
		return 0, err
	}
	return e.opt.Step, copyExact("adam state", v, e.opt.V)
}

func (e *cpuEngine) SetAdamState(m, v []float32, step int64) error {
	if len(m) != len(e.opt.M) || len(v) != len(e.opt.V) || step < 0 {
		return fmt.Errorf("nn: set adam state: %w: %d and %d moments, step %d, for %d parameters", ErrShape, len(m), len(v), step, len(e.opt.M))
	}
	copy(e.opt.M, m)
	copy(e.opt.V, v)
	e.opt.Step = step
	return nil
}

func (e *cpuEngine) Close() error { return nil }

// copyExact copies src into dst, which must be as long.
func copyExact(what string, dst, src []float32) error {
	if len(dst) != len(src) {
		return fmt.Errorf("nn: engine %s: %w: %d values, want %d", what, ErrShape, len(dst), len(src))
	}
	copy(dst, src)
	return nil
}
