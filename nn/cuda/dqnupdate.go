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

// dqnTerms is dqnloss.h's DQN_TERMS.
const dqnTerms = 3

// dqnState is what the Engine keeps for DQNUpdate: the target network
// (the online network's layout with parameters of its own), the packed
// batch, each row's terms, and the update's record and priorities.
type dqnState struct {
	target *Net
	batch  Buffer    // obs, next obs, actions, rewards, discounts, weights
	packed []float32 // the batch packed on the host, for one copy in
	terms  Buffer    // [DQN_TERMS, n] doubles
	out    Buffer    // the record (stepRecord doubles), then n |TD errors|
	ctl    Buffer
	res    []float64
}

// SetTarget keeps a DQN target network's parameters on the engine,
// beside the online network's, for DQNUpdate.
func (e *Engine) SetTarget(params []float32) error {
	if len(params) != e.net.nparams {
		return fmt.Errorf("cuda: set target: %w: %d values for %d parameters", nn.ErrShape, len(params), e.net.nparams)
	}
	unlock, err := e.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if e.dqn.target == nil {
		t := *e.net // the same layers; the parameters below are its own
		t.params = Buffer{}
		if err := t.params.Reserve(4 * t.nparams); err != nil {
			return err
		}
		e.dqn.target = &t
	}
	return upload(e.dqn.target.params.Ptr, params)
}

// DQNUpdate runs one DQN update whole on the device and waits for it
// once, at the end: the batch crosses in one copy; the target's forward
// pass on the next observations, the online network's on them (double
// DQN) and on the observations, the loss and its gradient (dqnloss.h),
// the backward pass, the gradient's norm and clipping to maxNorm (<= 0:
// never) and Adam's step with learning rate lr run there, and the stats
// and each transition's |TD error| (into td, as long as the batch) come
// back. The step is not applied where the loss or the norm is not finite,
// which applied says.
func (e *Engine) DQNUpdate(b nn.DQNBatch, loss nn.DQNLoss, maxNorm, lr float32, td []float64) (st nn.DQNStep, applied bool, err error) {
	spec := e.net.spec
	n, d, a := len(b.Actions), spec.ObsDim, spec.ActionDim
	if n == 0 || len(b.Obs) != n*d || len(b.NextObs) != n*d || len(b.Rewards) != n || len(b.Discounts) != n ||
		len(b.Weights) != n || len(td) != n {
		return st, false, fmt.Errorf("cuda: dqn update: %w: %d actions, %d and %d observation values, %d rewards, %d discounts, %d weights, %d priorities (observations of %d)",
			nn.ErrShape, n, len(b.Obs), len(b.NextObs), len(b.Rewards), len(b.Discounts), len(b.Weights), len(td), d)
	}
	for i, act := range b.Actions {
		if act < 0 || int(act) >= a {
			return st, false, fmt.Errorf("cuda: dqn update: %w: transition %d's action %d outside [0, %d)", nn.ErrShape, i, act, a)
		}
	}
	q := &e.dqn
	if q.target == nil {
		return st, false, errors.New("cuda: dqn update: no target network (SetTarget)")
	}
	if err := e.checkAdam(lr); err != nil {
		return st, false, err
	}
	if e.step == math.MaxInt64 {
		return st, false, errors.New("cuda: adam: step counter exhausted")
	}
	a0, unlock, err := e.lockSlot(0, n)
	if err != nil {
		return st, false, err
	}
	defer unlock()
	aTgt, aNext := e.slot(2), e.slot(1)
	for _, s := range []*Activations{aTgt, aNext} {
		if err := s.Reserve(e.net, n); err != nil {
			return st, false, err
		}
	}
	// One copy in: [obs | next obs | actions (their bits) | rewards | discounts | weights].
	size := 2*n*d + 4*n
	q.packed = slices.Grow(q.packed[:0], size)
	q.packed = append(append(q.packed, b.Obs...), b.NextObs...)
	for _, act := range b.Actions {
		q.packed = append(q.packed, math.Float32frombits(uint32(act)))
	}
	q.packed = append(append(append(q.packed, b.Rewards...), b.Discounts...), b.Weights...)
	for _, r := range []struct {
		b *Buffer
		n int
	}{{&q.batch, 4 * size}, {&q.terms, 8 * dqnTerms * n}, {&q.out, 8 * (stepRecord + n)}, {&q.ctl, 8},
		{&e.dPi, 4 * n * a}, {&e.dV, 4 * n}} {
		if err := r.b.Reserve(r.n); err != nil {
			return st, false, err
		}
	}
	if err := upload(q.batch.Ptr, q.packed); err != nil {
		return st, false, err
	}
	at := func(off int) DevicePtr { return q.batch.Ptr + DevicePtr(4*off) }
	obs, next := at(0), at(n*d)
	lt, vt, err := q.target.Forward(aTgt, next, n)
	if err != nil {
		return st, false, err
	}
	var ln, vn DevicePtr
	if loss.Double {
		if ln, vn, err = e.net.Forward(aNext, next, n); err != nil {
			return st, false, err
		}
	}
	// The observations' pass last on slot 0, which the backward pass reads.
	l, v, err := e.net.Forward(a0, obs, n)
	if err != nil {
		return st, false, err
	}
	dueling, double, dV := 0, 0, DevicePtr(0)
	if loss.Dueling {
		dueling, dV = 1, e.dV.Ptr
	}
	if loss.Double {
		double = 1
	}
	tdPtr := q.out.Ptr + DevicePtr(8*stepRecord)
	if err := e.c.Launch("dqn_loss", blocks(n, 128), [3]int{128, 1, 1}, l, v, ln, vn, lt, vt, at(2*n*d), at(2*n*d+n), at(2*n*d+2*n), at(2*n*d+3*n),
		n, a, loss.HuberDelta, dueling, double, e.dPi.Ptr, dV, q.terms.Ptr, tdPtr); err != nil {
		return st, false, err
	}
	if err := e.c.Launch("term_sums", [3]int{1, 1, 1}, [3]int{256, 1, 1}, q.terms.Ptr, n, dqnTerms, q.out.Ptr); err != nil {
		return st, false, err
	}
	if err := e.queueGuardedStep(a0, n, dV, q.ctl.Ptr, lr, e.step+1, "dqn_guard", q.out.Ptr, maxNorm); err != nil {
		return st, false, err
	}
	// The one wait: the record and the priorities come back.
	q.res = slices.Grow(q.res[:0], stepRecord+n)[:stepRecord+n]
	if err := MemcpyDtoH(unsafe.Pointer(&q.res[0]), q.out.Ptr, int64(8*(stepRecord+n))); err != nil {
		return st, false, fmt.Errorf("cuda: copy the update's record out: %w", err)
	}
	copy(td, q.res[stepRecord:])
	r := q.res
	st = nn.DQNStep{Loss: r[0], MeanQ: r[1], MeanTD: r[2], Norm: float32(r[3])}
	if applied = r[stepRecord-1] == 1; applied {
		e.step++
	}
	e.scale = 1
	return st, applied, nil
}
