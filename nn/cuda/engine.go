//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/distrl/distrl/nn"
)

// Engine is an nn.Engine on one GPU: the parameters, the gradient and
// Adam's moments live there, and every pass is kernels.cu's. Per call
// only the observations (Forward), the outputs' gradient (Backward), the
// outputs and the gradient's norm (one float64) cross; parameters and
// Adam's state cross when asked for (Params, AdamState).
type Engine struct {
	c       *Context
	net     *Net
	grad    Buffer
	m, v    Buffer
	step    int64
	b1, b2  float32
	eps     float32
	scale   float32 // the clip factor of the last ClipGradNorm, applied by Step
	slots   []*Activations
	scratch Scratch
	dPi, dV Buffer
	norm    Buffer // sumsq's partial sums
	staged  Buffer // Stage's observations
	nstaged int    // and their rows
	idx     Buffer // ForwardRows's rows
	surr    surrogateState
	dqn     dqnState
}

var _ nn.Engine = (*Engine)(nil)

// normBlocks bounds sumsq's grid, and the partial sums sumsq_final adds.
const normBlocks = 1024

// EngineOpener returns an nn.OpenEngine for GPU ordinal.
func EngineOpener(ordinal int) nn.OpenEngine {
	return func(net *nn.ActorCritic, opt *nn.Adam) (nn.Engine, error) { return OpenEngine(ordinal, net, opt) }
}

// OpenEngine creates a context on GPU ordinal and uploads net's
// parameters and opt's state.
func OpenEngine(ordinal int, net *nn.ActorCritic, opt *nn.Adam) (*Engine, error) {
	if h := net.Spec().Head; h != nn.Categorical {
		return nil, fmt.Errorf("%w: %w: got %q", ErrUnsupported, nn.ErrEngineHead, h)
	}
	c, unlock, err := OpenContext(ordinal)
	if err != nil {
		return nil, err
	}
	defer unlock()
	e := &Engine{c: c, b1: opt.Beta1, b2: opt.Beta2, eps: opt.Eps, scale: 1}
	if e.net, err = NewNet(c, net); err != nil {
		_ = c.Close()
		return nil, err
	}
	n := 4 * net.NumParams()
	for _, b := range []*Buffer{&e.grad, &e.m, &e.v} {
		if err == nil {
			err = b.Reserve(n)
		}
	}
	if err == nil {
		err = e.norm.Reserve(8 * normBlocks)
	}
	if err == nil {
		err = e.setAdamState(opt.M, opt.V, opt.Step)
	}
	if err == nil {
		err = MemsetD32(e.grad.Ptr, 0, int64(net.NumParams()))
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("cuda: open engine: %w", err)
	}
	return e, nil
}

func (e *Engine) slot(i int) *Activations {
	for len(e.slots) <= i {
		e.slots = append(e.slots, &Activations{})
	}
	return e.slots[i]
}

// Forward: see nn.Engine.
func (e *Engine) Forward(slot int, obs []float32, batch int, out *nn.Output) error {
	s := e.net.spec
	if batch <= 0 || len(obs) != batch*s.ObsDim {
		return fmt.Errorf("cuda: forward: %w: %d observations for %d rows of %d", nn.ErrShape, len(obs), batch, s.ObsDim)
	}
	a, unlock, err := e.lockSlot(slot, batch)
	if err != nil {
		return err
	}
	defer unlock()
	if err := upload(a.Obs.Ptr, obs); err != nil {
		return err
	}
	return e.forward(a, batch, out)
}

// lockSlot makes the context current (unlock undoes it) and returns the
// activations of slot, sized for batch rows.
func (e *Engine) lockSlot(slot, batch int) (a *Activations, unlock func(), err error) {
	if unlock, err = e.c.Lock(); err != nil {
		return nil, nil, err
	}
	a = e.slot(slot)
	if err := a.Reserve(e.net, batch); err != nil {
		unlock()
		return nil, nil, err
	}
	return a, unlock, nil
}

// Stage: see nn.Engine.
func (e *Engine) Stage(obs []float32, rows int) error {
	if d := e.net.spec.ObsDim; rows < 0 || len(obs) != rows*d {
		return fmt.Errorf("cuda: stage: %w: %d values for %d rows of %d", nn.ErrShape, len(obs), rows, d)
	}
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	e.nstaged, e.surr.nrows = 0, -1
	if err := e.staged.Reserve(4 * len(obs)); err != nil {
		return err
	}
	if err := upload(e.staged.Ptr, obs); err != nil {
		return err
	}
	e.nstaged = rows
	return nil
}

// ForwardRows: see nn.Engine.
func (e *Engine) ForwardRows(slot int, idx []int32, out *nn.Output) error {
	batch := len(idx)
	if batch == 0 {
		return fmt.Errorf("cuda: forward: %w: no rows", nn.ErrShape)
	}
	for _, r := range idx {
		if r < 0 || int(r) >= e.nstaged {
			return fmt.Errorf("cuda: forward: row %d of %d staged", r, e.nstaged)
		}
	}
	a, unlock, err := e.lockSlot(slot, batch)
	if err != nil {
		return err
	}
	defer unlock()
	if err := e.idx.Reserve(4 * batch); err != nil {
		return err
	}
	if err := MemcpyHtoD(e.idx.Ptr, unsafe.Pointer(&idx[0]), int64(4*batch)); err != nil {
		return fmt.Errorf("cuda: copy rows in: %w", err)
	}
	d := e.net.spec.ObsDim
	if err := e.c.Launch("gather_rows", blocks(batch*d, 256), [3]int{256, 1, 1}, e.staged.Ptr, e.idx.Ptr, a.Obs.Ptr, batch, d); err != nil {
		return err
	}
	return e.forward(a, batch, out)
}

// forward runs the network on a.Obs's batch rows and brings the outputs
// back; the context is current.
func (e *Engine) forward(a *Activations, batch int, out *nn.Output) error {
	s := e.net.spec
	pi, v, err := e.net.Forward(a, a.Obs.Ptr, batch)
	if err != nil {
		return err
	}
	out.Logits = grow(out.Logits, batch*s.ActionDim)
	out.Values = grow(out.Values, batch)
	out.Mean, out.LogStd = out.Mean[:0], out.LogStd[:0]
	if err := download(out.Logits, pi); err != nil {
		return err
	}
	return download(out.Values, v)
}

// Backward: see nn.Engine.
func (e *Engine) Backward(slot int, batch int, dOut *nn.Output) error {
	s := e.net.spec
	if slot >= len(e.slots) || e.slots[slot].batch != batch {
		return fmt.Errorf("cuda: backward: %w: slot %d holds no forward pass of %d rows", nn.ErrShape, slot, batch)
	}
	if l := len(dOut.Logits); l != 0 && l != batch*s.ActionDim || len(dOut.Values) != 0 && len(dOut.Values) != batch ||
		len(dOut.Mean) != 0 || len(dOut.LogStd) != 0 {
		return fmt.Errorf("cuda: backward: %w: gradients of %d logits and %d values for %d rows", nn.ErrShape, len(dOut.Logits), len(dOut.Values), batch)
	}
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	var dPi, dV DevicePtr
	if len(dOut.Logits) != 0 {
		if err := e.dPi.Reserve(4 * len(dOut.Logits)); err != nil {
			return err
		}
		if err := upload(e.dPi.Ptr, dOut.Logits); err != nil {
			return err
		}
		dPi = e.dPi.Ptr
	}
	if len(dOut.Values) != 0 {
		if err := e.dV.Reserve(4 * batch); err != nil {
			return err
		}
		if err := upload(e.dV.Ptr, dOut.Values); err != nil {
			return err
		}
		dV = e.dV.Ptr
	}
	return e.net.Backward(e.slots[slot], &e.scratch, batch, dPi, dV, e.grad.Ptr)
}

// ZeroGrad: see nn.Engine.
func (e *Engine) ZeroGrad() error {
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	e.scale = 1
	return MemsetD32(e.grad.Ptr, 0, int64(e.net.nparams))
}

// Grad: see nn.Engine.
func (e *Engine) Grad(dst []float32) error {
	return e.transfer(dst, e.grad.Ptr, false)
}

// SetGrad: see nn.Engine.
func (e *Engine) SetGrad(src []float32) error {
	e.scale = 1
	return e.transfer(src, e.grad.Ptr, true)
}

// Params: see nn.Engine.
func (e *Engine) Params(dst []float32) error { return e.transfer(dst, e.net.params.Ptr, false) }

// SetParams: see nn.Engine.
func (e *Engine) SetParams(src []float32) error { return e.transfer(src, e.net.params.Ptr, true) }

// transfer copies a [NumParams] vector to (in) or from the device.
func (e *Engine) transfer(host []float32, dev DevicePtr, in bool) error {
	if len(host) != e.net.nparams {
		return fmt.Errorf("cuda: %w: %d values for %d parameters", nn.ErrShape, len(host), e.net.nparams)
	}
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if in {
		return upload(dev, host)
	}
	return download(host, dev)
}

// ClipGradNorm: see nn.Engine. The sum of squares runs in double on the
// device, as nn's does on the CPU; the scale is applied by Step.
func (e *Engine) ClipGradNorm(maxNorm float32) (float32, error) {
	unlock, err := e.c.Lock()
	if err != nil {
		return 0, err
	}
	defer unlock()
	n := e.net.nparams
	nb := e.normBlocks()
	if err := e.c.Launch("sumsq", [3]int{nb, 1, 1}, [3]int{256, 1, 1}, e.grad.Ptr, n, e.norm.Ptr); err != nil {
		return 0, err
	}
	if err := e.c.Launch("sumsq_final", [3]int{1, 1, 1}, [3]int{256, 1, 1}, e.norm.Ptr, nb); err != nil {
		return 0, err
	}
	var ss float64
	if err := MemcpyDtoH(unsafe.Pointer(&ss), e.norm.Ptr, 8); err != nil {
		return 0, fmt.Errorf("cuda: copy the gradient's norm: %w", err)
	}
	norm := math.Sqrt(ss)
	e.scale = 1
	if maxNorm > 0 && norm > float64(maxNorm) && !math.IsInf(norm, 0) {
		e.scale = float32(float64(maxNorm) / (norm + 1e-6)) // nn.ClipGradNorm's
	}
	return float32(norm), nil
}

// Step: see nn.Engine. Checks as nn.Adam.Update does, before anything
// changes.
func (e *Engine) Step(lr float32) error {
	if err := e.checkAdam(lr); err != nil {
		return err
	}
	if e.step == math.MaxInt64 {
		return errors.New("cuda: adam: step counter exhausted")
	}
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	stepSize, invSqrtC2 := e.biasCorrection(lr, e.step+1)
	n := e.net.nparams
	if err := e.c.Launch("adam", blocks(n, 256), [3]int{256, 1, 1}, e.net.params.Ptr, e.grad.Ptr, e.m.Ptr, e.v.Ptr, n,
		e.scale, e.b1, e.b2, e.eps, stepSize, invSqrtC2); err != nil {
		return err
	}
	e.step++
	e.scale = 1
	return nil
}

// checkAdam refuses what nn.Adam.Update refuses, before anything changes.
func (e *Engine) checkAdam(lr float32) error {
	if !(lr >= 0) || !(e.b1 >= 0 && e.b1 < 1) || !(e.b2 >= 0 && e.b2 < 1) || !(e.eps > 0) {
		return fmt.Errorf("cuda: adam: invalid hyperparameters lr=%v beta1=%v beta2=%v eps=%v", lr, e.b1, e.b2, e.eps)
	}
	return nil
}

// biasCorrection is Adam's step size and 1/sqrt(1-beta2^t) for step t,
// in double as nn does.
func (e *Engine) biasCorrection(lr float32, step int64) (stepSize, invSqrtC2 float32) {
	t := float64(step)
	c1 := 1 - math.Pow(float64(e.b1), t)
	c2 := 1 - math.Pow(float64(e.b2), t)
	return float32(float64(lr) / c1), float32(1 / math.Sqrt(c2))
}

// normBlocks is sumsq's grid for the gradient.
func (e *Engine) normBlocks() int { return min(normBlocks, (e.net.nparams+255)/256) }

// AdamState: see nn.Engine.
func (e *Engine) AdamState(m, v []float32) (int64, error) {
	if err := e.transfer(m, e.m.Ptr, false); err != nil {
		return 0, err
	}
	return e.step, e.transfer(v, e.v.Ptr, false)
}

// SetAdamState: see nn.Engine.
func (e *Engine) SetAdamState(m, v []float32, step int64) error {
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	return e.setAdamState(m, v, step)
}

func (e *Engine) setAdamState(m, v []float32, step int64) error {
	n := e.net.nparams
	if len(m) != n || len(v) != n || step < 0 {
		return fmt.Errorf("cuda: set adam state: %w: %d and %d moments, step %d, for %d parameters", nn.ErrShape, len(m), len(v), step, n)
	}
	if err := upload(e.m.Ptr, m); err != nil {
		return err
	}
	if err := upload(e.v.Ptr, v); err != nil {
		return err
	}
	e.step = step
	return nil
}

// Sync waits for every queued kernel; benchmarks time with it.
func (e *Engine) Sync() error {
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	return Synchronize()
}

// Close destroys the engine's context and all its memory.
func (e *Engine) Close() error { return e.c.Close() }

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
