package ppo

import (
	"cmp"
	"errors"
	"fmt"
	"math"

	"github.com/distrl/distrl/nn"
)

// samples is a set of n rows in struct-of-arrays form: the flattened
// batches of an update, or one minibatch gathered from them. Only one of
// actions (categorical head) and cont (Gaussian head, [n*actDim]) is used.
type samples struct {
	n                                int
	rows                             []int32   // a minibatch's rows of the update (gather's idx)
	obs                              []float32 // [n*obsDim]
	actions                          []int32   // [n]
	cont                             []float32 // [n*actDim]
	oldLogp, oldValues, adv, returns []float32 // [n]
}

// resize makes room for n rows, reusing the buffers when they are large
// enough. The contents are unspecified.
func (s *samples) resize(n, obsDim, actDim int, gaussian bool) {
	s.n = n
	s.obs = grow(s.obs, n*obsDim)
	if gaussian {
		s.cont, s.actions = grow(s.cont, n*actDim), s.actions[:0]
	} else {
		s.actions, s.cont = grow(s.actions, n), s.cont[:0]
	}
	s.oldLogp = grow(s.oldLogp, n)
	s.oldValues = grow(s.oldValues, n)
	s.adv = grow(s.adv, n)
	s.returns = grow(s.returns, n)
}

// gather fills s with the rows idx of src, but for their observations
// where obs is false (an engine has them staged: s.rows says which).
func (s *samples) gather(src *samples, idx []int, obsDim, actDim int, gaussian, obs bool) {
	s.resize(len(idx), obsDim, actDim, gaussian)
	s.rows = grow(s.rows, len(idx))
	for i, j := range idx {
		s.rows[i] = int32(j)
		if obs {
			copy(s.obs[i*obsDim:(i+1)*obsDim], src.obs[j*obsDim:(j+1)*obsDim])
		}
		if gaussian {
			copy(s.cont[i*actDim:(i+1)*actDim], src.cont[j*actDim:(j+1)*actDim])
		} else {
			s.actions[i] = src.actions[j]
		}
		s.oldLogp[i] = src.oldLogp[j]
		s.oldValues[i] = src.oldValues[j]
		s.adv[i] = src.adv[j]
		s.returns[i] = src.returns[j]
	}
}

// lossTerms are the parts of the PPO loss of one minibatch, as means over
// its rows, plus the diagnostics computed on the way.
type lossTerms struct {
	total    float64 // the minimised loss: policy + ValueCoef·value - EntropyCoef·entropy
	policy   float64 // -mean(min(r·A, clip(r)·A))
	value    float64 // 0.5·mean((V-R)²), or its clipped variant
	entropy  float64 // mean entropy of the new policy
	approxKL float64 // mean((r-1) - log r)
	clipFrac float64 // fraction of rows with |r-1| > ClipEps
}

// shard is the state of one goroutine's part of a minibatch: its forward
// pass, the loss's gradient with respect to the network's outputs, the
// parameter gradient of its rows and the sums of its loss terms.
type shard struct {
	ws        nn.Workspace
	out, dOut nn.Output
	grad      []float32 // unused by shard 0, which writes the caller's
	t         lossTerms // sums over the shard's rows, not yet means
	err       error
}

// minShardRows is the fewest rows of a minibatch given to a goroutine of
// its own: below it the hand-off costs more than the share of the forward
// and backward passes it saves.
const minShardRows = 64

// SetThreads sets how many goroutines compute one minibatch's gradient,
// each on at least 64 of its rows (1, the default: the caller's alone).
// The gradient is the sum of the parts', so it equals the one-goroutine
// gradient to float32 rounding.
func (l *Learner) SetThreads(n int) {
	l.shards = make([]shard, max(n, 1))
}

// lossAndGrad evaluates the PPO loss of mb at the network's current
// parameters and stores its gradient with respect to those parameters in
// grad (overwriting it), or on an engine in the engine's gradient. Update and the finite-difference test both go
// through it, so the test checks the very code that trains. The rows are
// split over up to len(l.shards) goroutines (see SetThreads).
func (l *Learner) lossAndGrad(mb *samples, grad []float32) (lossTerms, error) {
	var t lossTerms
	n := mb.n
	if n <= 0 {
		return t, errors.New("ppo: loss of an empty minibatch")
	}
	k := max(min(len(l.shards), n/minShardRows), 1)
	if l.eng != nil {
		k = 1
	}
	for i := 1; i < k; i++ {
		sh := &l.shards[i]
		sh.grad = grow(sh.grad, len(grad))
		l.wg.Go(func() { sh.err = l.shardLossAndGrad(sh, mb, i*n/k, (i+1)*n/k, sh.grad) })
	}
	var err error
	if l.eng != nil {
		err = l.engineLossAndGrad(&l.shards[0], mb)
	} else {
		err = l.shardLossAndGrad(&l.shards[0], mb, 0, n/k, grad)
	}
	l.wg.Wait()
	t = l.shards[0].t
	for i := 1; i < k; i++ {
		sh := &l.shards[i]
		err = cmp.Or(err, sh.err)
		for j, g := range sh.grad {
			grad[j] += g
		}
		t.policy += sh.t.policy
		t.value += sh.t.value
		t.entropy += sh.t.entropy
		t.approxKL += sh.t.approxKL
		t.clipFrac += sh.t.clipFrac
	}
	if err != nil {
		return t, err
	}
	if l.gaussian {
		t.entropy = float64(n) * float64(nn.GaussianEntropy(l.shards[0].out.LogStd))
	}
	l.means(&t, n)
	return t, nil
}

// means turns t's sums over n rows into means, and computes the total.
func (l *Learner) means(t *lossTerms, n int) {
	inv := 1 / float64(n)
	t.policy *= inv
	t.value *= inv
	t.entropy *= inv
	t.approxKL *= inv
	t.clipFrac *= inv
	t.total = t.policy + l.cfg.ValueCoef*t.value - l.cfg.EntropyCoef*t.entropy
}

// shardLossAndGrad computes the rows [lo, hi) of the loss of the n-row
// minibatch mb into sh.t (sums over those rows) and their share of the
// gradient (the gradient of the loss's mean over all n rows) into grad,
// overwriting it. Shard 0 (lo = 0) also takes the Gaussian entropy's
// gradient, which depends on no row.
//
// The per-row terms are accumulated in float64; the network itself runs in
// float32. The derivative of the surrogate min(r·A, clip(r)·A) is taken as
// A where the unclipped term is the smaller or they are equal (inside the
// clip range), and 0 where the clipped, constant term is the smaller, as
// autograd does for the equivalent max of the negated terms.
func (l *Learner) shardLossAndGrad(sh *shard, mb *samples, lo, hi int, grad []float32) error {
	rows := hi - lo
	if err := l.net.Forward(mb.obs[lo*l.obsDim:hi*l.obsDim], rows, &sh.ws, &sh.out); err != nil {
		return fmt.Errorf("ppo: loss: %w", err)
	}
	l.rowsLoss(sh, mb, lo, hi)
	clear(grad)
	if err := l.net.Backward(&sh.ws, rows, &sh.dOut, grad); err != nil {
		return fmt.Errorf("ppo: loss gradient: %w", err)
	}
	return nil
}

// engineLossAndGrad is shardLossAndGrad for the whole minibatch on the
// engine: the network's passes run there on the observations staged for
// the update (stage), the loss of its outputs here (the same rowsLoss),
// and the gradient stays there.
func (l *Learner) engineLossAndGrad(sh *shard, mb *samples) error {
	if err := l.eng.ForwardRows(0, mb.rows, &sh.out); err != nil {
		return fmt.Errorf("ppo: loss: %w", err)
	}
	l.rowsLoss(sh, mb, 0, mb.n)
	if err := l.eng.ZeroGrad(); err != nil {
		return fmt.Errorf("ppo: loss gradient: %w", err)
	}
	if err := l.eng.Backward(0, mb.n, &sh.dOut); err != nil {
		return fmt.Errorf("ppo: loss gradient: %w", err)
	}
	return nil
}

// rowsLoss computes the loss of the rows [lo, hi) of mb from the
// network's outputs for them (sh.out) into sh.t, and the gradient of the
// minibatch's mean loss with respect to those outputs into sh.dOut.
func (l *Learner) rowsLoss(sh *shard, mb *samples, lo, hi int) {
	t := &sh.t
	*t = lossTerms{}
	rows := hi - lo
	a := l.actDim
	eps := l.cfg.ClipEps
	inv := 1 / float64(mb.n)
	valueScale := l.cfg.ValueCoef * inv
	entCoef := l.cfg.EntropyCoef

	d := &sh.dOut
	d.Values = grow(d.Values, rows)
	var dPi, logStd []float32
	if l.gaussian {
		d.Logits = d.Logits[:0]
		d.Mean = zeroed(d.Mean, rows*a)
		d.LogStd = zeroed(d.LogStd, a)
		dPi, logStd = d.Mean, sh.out.LogStd
	} else {
		d.Mean, d.LogStd = d.Mean[:0], d.LogStd[:0]
		d.Logits = zeroed(d.Logits, rows*a)
		dPi = d.Logits
	}
	pi := sh.out.Logits
	if l.gaussian {
		pi = sh.out.Mean
	}

	for i := range rows {
		r := lo + i // the row in mb
		row := pi[i*a : (i+1)*a]
		dRow := dPi[i*a : (i+1)*a]
		var logp float64
		if l.gaussian {
			logp = float64(nn.GaussianLogProb(row, logStd, mb.cont[r*a:(r+1)*a]))
		} else {
			logp = float64(nn.CategoricalLogProb(row, mb.actions[r]))
		}

		// Clipped surrogate.
		logRatio := logp - float64(mb.oldLogp[r])
		ratio := math.Exp(logRatio)
		adv := float64(mb.adv[r])
		surr, clipped := ratio*adv, min(max(ratio, 1-eps), 1+eps)*adv
		var dSurr float64 // ∂surrogate/∂logp = A·ratio, or 0 where clipped
		if surr <= clipped {
			dSurr = adv * ratio
		} else {
			// Leave dSurr at 0 rather than multiplying by 0: an overflowed
			// ratio is harmless where it is clipped, but 0·Inf is NaN.
			surr = clipped
		}
		t.policy -= surr
		t.approxKL += (ratio - 1) - logRatio
		if math.Abs(ratio-1) > eps {
			t.clipFrac++
		}
		if dSurr != 0 {
			s := -dSurr * inv
			if l.gaussian {
				nn.GaussianLogProbGrad(row, logStd, mb.cont[r*a:(r+1)*a], float32(s), dRow, d.LogStd)
			} else {
				nn.CategoricalLogProbGrad(row, mb.actions[r], float32(s), dRow)
			}
		}

		// Entropy bonus. A Gaussian's entropy depends only on the shared
		// log-stds: lossAndGrad computes it, and shard 0 its gradient.
		if !l.gaussian {
			t.entropy += float64(nn.CategoricalEntropy(row))
			if entCoef != 0 {
				nn.CategoricalEntropyGrad(row, float32(-entCoef*inv), dRow)
			}
		}

		// Value loss.
		v, ret := float64(sh.out.Values[i]), float64(mb.returns[r])
		diff := v - ret
		loss, dv := 0.5*diff*diff, diff
		if l.cfg.ClipValueLoss {
			old := float64(mb.oldValues[r])
			vc := old + min(max(v-old, -eps), eps)
			// Where the clipped error is the larger, V is outside the clip
			// range (inside it vc = v and both errors are equal), so the
			// loss does not depend on V there.
			if dc := vc - ret; dc*dc > diff*diff {
				loss, dv = 0.5*dc*dc, 0
			}
		}
		t.value += loss
		d.Values[i] = float32(valueScale * dv)
	}
	if l.gaussian && lo == 0 && entCoef != 0 {
		nn.GaussianEntropyGrad(logStd, float32(-entCoef), d.LogStd)
	}
}

// grow returns s resliced to n elements, reallocating only if its capacity
// is too small. The contents are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// zeroed is grow followed by clearing, for gradients the helpers add into.
func zeroed(s []float32, n int) []float32 {
	s = grow(s, n)
	clear(s)
	return s
}
