//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/distrl/distrl/nn"
)

// stepRecord is kernels.cu's STEP_RECORD: the doubles a step writes.
const stepRecord = 8

// surrogateTerms is surrogate.h's SURR_TERMS.
const surrogateTerms = 5

// surrogateState is what the Engine keeps for SurrogateSteps: the staged
// rows' loss inputs, the rows of the queued minibatches, each row's terms,
// the steps' records and their control word.
type surrogateState struct {
	rows    Buffer // actions, old log-probs, old values, advantages, returns: 5 × nstaged × 4 bytes
	nrows   int    // the staged rows they are for; -1 when none
	idx     Buffer // every queued minibatch's rows, in order
	terms   Buffer // [SURR_TERMS, rows] doubles of the step being computed
	records Buffer // [steps, stepRecord] doubles
	ctl     Buffer // kernels.cu's StepControl
	host    []float64
}

// StageSurrogate keeps each staged row's loss inputs on the device, for
// SurrogateSteps; Stage the observations first. They cross once an update.
func (e *Engine) StageSurrogate(r nn.SurrogateRows) error {
	n := e.nstaged
	if len(r.Actions) != n || len(r.OldLogp) != n || len(r.OldValues) != n || len(r.Adv) != n || len(r.Returns) != n {
		return fmt.Errorf("cuda: stage surrogate: %w: %d actions, %d, %d, %d and %d values for %d staged rows",
			nn.ErrShape, len(r.Actions), len(r.OldLogp), len(r.OldValues), len(r.Adv), len(r.Returns), n)
	}
	a := int32(e.net.spec.ActionDim)
	for i, act := range r.Actions {
		if act < 0 || act >= a {
			return fmt.Errorf("cuda: stage surrogate: %w: row %d's action %d outside [0, %d)", nn.ErrShape, i, act, a)
		}
	}
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	s := &e.surr
	s.nrows = -1
	if n == 0 {
		s.nrows = 0
		return nil
	}
	if err := s.rows.Reserve(5 * 4 * n); err != nil {
		return err
	}
	if err := MemcpyHtoD(s.rows.Ptr, unsafe.Pointer(&r.Actions[0]), int64(4*n)); err != nil {
		return fmt.Errorf("cuda: copy actions in: %w", err)
	}
	for i, v := range [][]float32{r.OldLogp, r.OldValues, r.Adv, r.Returns} {
		if err := upload(s.rows.Ptr+DevicePtr(4*n*(i+1)), v); err != nil {
			return err
		}
	}
	s.nrows = n
	return nil
}

// SurrogateSteps queues one PPO step per minibatch (minibatch m is the
// staged rows idx[bounds[m]:bounds[m+1]], none empty) and waits for them
// once, at the end: for each, the forward pass, the loss of loss and its
// gradient (the minibatch's mean), the gradient's norm and clipping to
// maxNorm (<= 0: never), and Adam's step with learning rate lr, each as
// Forward, Backward, ClipGradNorm and Step would. A step whose norm or
// loss is not finite is not applied, nor is any after it; out[m] (as long
// as the minibatches) gets each step's terms and norm, and the number of
// steps applied is returned.
func (e *Engine) SurrogateSteps(idx []int32, bounds []int, loss nn.SurrogateLoss, maxNorm, lr float32, out []nn.SurrogateStep) (int, error) {
	steps := len(bounds) - 1
	if steps < 1 || len(out) != steps || bounds[0] != 0 || bounds[steps] != len(idx) {
		return 0, fmt.Errorf("cuda: surrogate steps: %w: %d bounds of %d rows for %d records", nn.ErrShape, len(bounds), len(idx), len(out))
	}
	if e.surr.nrows != e.nstaged || e.nstaged == 0 {
		return 0, errors.New("cuda: surrogate steps: the staged rows have no loss inputs (StageSurrogate)")
	}
	widest := 0
	for m := range steps {
		if bounds[m+1] <= bounds[m] {
			return 0, fmt.Errorf("cuda: surrogate steps: %w: minibatch %d is empty", nn.ErrShape, m)
		}
		widest = max(widest, bounds[m+1]-bounds[m])
	}
	for _, r := range idx {
		if r < 0 || int(r) >= e.nstaged {
			return 0, fmt.Errorf("cuda: surrogate steps: row %d of %d staged", r, e.nstaged)
		}
	}
	if err := e.checkAdam(lr); err != nil {
		return 0, err
	}
	if e.step > math.MaxInt64-int64(steps) {
		return 0, errors.New("cuda: adam: step counter exhausted")
	}
	a, unlock, err := e.lockSlot(0, widest)
	if err != nil {
		return 0, err
	}
	defer unlock()
	s := &e.surr
	for _, r := range []struct {
		b *Buffer
		n int
	}{{&s.idx, 4 * len(idx)}, {&s.terms, 8 * surrogateTerms * widest}, {&s.records, 8 * stepRecord * steps}, {&s.ctl, 8},
		{&e.dPi, 4 * widest * e.net.spec.ActionDim}, {&e.dV, 4 * widest}} {
		if err := r.b.Reserve(r.n); err != nil {
			return 0, err
		}
	}
	if err := MemcpyHtoD(s.idx.Ptr, unsafe.Pointer(&idx[0]), int64(4*len(idx))); err != nil {
		return 0, fmt.Errorf("cuda: copy rows in: %w", err)
	}
	if err := MemsetD32(s.ctl.Ptr, 0, 2); err != nil {
		return 0, fmt.Errorf("cuda: surrogate steps: %w", err)
	}
	for m := range steps {
		if err := e.queueSurrogateStep(a, m, bounds[m], bounds[m+1]-bounds[m], loss, maxNorm, lr); err != nil {
			return 0, err
		}
	}
	// The one wait: the records and the control word come back.
	s.host = slices.Grow(s.host[:0], stepRecord*steps)[:stepRecord*steps]
	if err := MemcpyDtoH(unsafe.Pointer(&s.host[0]), s.records.Ptr, int64(8*stepRecord*steps)); err != nil {
		return 0, fmt.Errorf("cuda: copy the steps' records out: %w", err)
	}
	var ctl [2]int32
	if err := MemcpyDtoH(unsafe.Pointer(&ctl[0]), s.ctl.Ptr, 8); err != nil {
		return 0, fmt.Errorf("cuda: copy the steps' control out: %w", err)
	}
	for m := range steps {
		r := s.host[m*stepRecord:]
		out[m] = nn.SurrogateStep{Policy: r[0], Value: r[1], Entropy: r[2], ApproxKL: r[3], ClipFrac: r[4], Norm: float32(r[5])}
	}
	applied := steps
	if ctl[0] != 0 {
		applied = int(ctl[0]) - 1
	}
	e.step += int64(applied)
	e.scale = 1
	return applied, nil
}

// queueSurrogateStep queues minibatch m of SurrogateSteps: rows idx[off:off+rows].
func (e *Engine) queueSurrogateStep(a *Activations, m, off, rows int, loss nn.SurrogateLoss, maxNorm, lr float32) error {
	s, spec := &e.surr, e.net.spec
	d, n := spec.ObsDim, e.nstaged
	rowsIdx := s.idx.Ptr + DevicePtr(4*off)
	if err := e.c.Launch("gather_rows", blocks(rows*d, 256), [3]int{256, 1, 1}, e.staged.Ptr, rowsIdx, a.Obs.Ptr, rows, d); err != nil {
		return err
	}
	pi, v, err := e.net.Forward(a, a.Obs.Ptr, rows)
	if err != nil {
		return err
	}
	inv := 1 / float64(rows)
	clip := 0
	if loss.ClipValue {
		clip = 1
	}
	col := func(i int) DevicePtr { return s.rows.Ptr + DevicePtr(4*n*i) }
	if err := e.c.Launch("ppo_loss", blocks(rows, 128), [3]int{128, 1, 1}, pi, v, rowsIdx, col(0), col(1), col(2), col(3), col(4),
		rows, spec.ActionDim, loss.ClipEps, inv, loss.ValueCoef*inv, loss.EntropyCoef, clip, e.dPi.Ptr, e.dV.Ptr, s.terms.Ptr); err != nil {
		return err
	}
	record := s.records.Ptr + DevicePtr(8*stepRecord*m)
	if err := e.c.Launch("term_sums", [3]int{1, 1, 1}, [3]int{256, 1, 1}, s.terms.Ptr, rows, surrogateTerms, record); err != nil {
		return err
	}
	return e.queueGuardedStep(a, rows, e.dV.Ptr, s.ctl.Ptr, lr, e.step+1+int64(m), "surrogate_guard",
		record, m, maxNorm, inv, loss.ValueCoef, loss.EntropyCoef)
}

// queueGuardedStep queues what follows a whole step's loss: the backward
// pass of a's forward pass of rows rows from the loss's gradient (e.dPi,
// and dV: 0 for none) into the zeroed gradient, its squared norm, the
// guard kernel guard (launched with sumsq's partials and their count,
// then guardArgs, then ctl), which sets the clip factor and may stop the
// step, and Adam's step number step, skipped if the guard stopped it.
func (e *Engine) queueGuardedStep(a *Activations, rows int, dV, ctl DevicePtr, lr float32, step int64, guard string, guardArgs ...any) error {
	if err := MemsetD32(e.grad.Ptr, 0, int64(e.net.nparams)); err != nil {
		return fmt.Errorf("cuda: zero the gradient: %w", err)
	}
	if err := e.net.Backward(a, &e.scratch, rows, e.dPi.Ptr, dV, e.grad.Ptr); err != nil {
		return err
	}
	nb := e.normBlocks()
	if err := e.c.Launch("sumsq", [3]int{nb, 1, 1}, [3]int{256, 1, 1}, e.grad.Ptr, e.net.nparams, e.norm.Ptr); err != nil {
		return err
	}
	args := append(append([]any{e.norm.Ptr, nb}, guardArgs...), ctl)
	if err := e.c.Launch(guard, [3]int{1, 1, 1}, [3]int{256, 1, 1}, args...); err != nil {
		return err
	}
	stepSize, invSqrtC2 := e.biasCorrection(lr, step)
	return e.c.Launch("adam_guarded", blocks(e.net.nparams, 256), [3]int{256, 1, 1}, e.net.params.Ptr, e.grad.Ptr, e.m.Ptr, e.v.Ptr,
		e.net.nparams, ctl, e.b1, e.b2, e.eps, stepSize, invSqrtC2)
}
