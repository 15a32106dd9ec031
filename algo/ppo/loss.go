package ppo

import (
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

// gather fills s with the rows idx of src.
func (s *samples) gather(src *samples, idx []int, obsDim, actDim int, gaussian bool) {
	s.resize(len(idx), obsDim, actDim, gaussian)
	for i, j := range idx {
		copy(s.obs[i*obsDim:(i+1)*obsDim], src.obs[j*obsDim:(j+1)*obsDim])
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

// lossAndGrad evaluates the PPO loss of mb at the network's current
// parameters and stores its gradient with respect to those parameters in
// grad (overwriting it). Update and the finite-difference test both go
// through it, so the test checks the very code that trains.
//
// The per-row terms are accumulated in float64; the network itself runs in
// float32. The derivative of the surrogate min(r·A, clip(r)·A) is taken as
// A where the unclipped term is the smaller or they are equal (inside the
// clip range), and 0 where the clipped, constant term is the smaller, as
// autograd does for the equivalent max of the negated terms.
func (l *Learner) lossAndGrad(mb *samples, grad []float32) (lossTerms, error) {
	var t lossTerms
	n := mb.n
	if n <= 0 {
		return t, errors.New("ppo: loss of an empty minibatch")
	}
	if err := l.net.Forward(mb.obs[:n*l.obsDim], n, &l.ws, &l.out); err != nil {
		return t, fmt.Errorf("ppo: loss: %w", err)
	}
	a := l.actDim
	eps := l.cfg.ClipEps
	inv := 1 / float64(n)
	valueScale := l.cfg.ValueCoef * inv
	entCoef := l.cfg.EntropyCoef

	d := &l.dOut
	d.Values = grow(d.Values, n)
	var dPi, logStd []float32
	if l.gaussian {
		d.Logits = d.Logits[:0]
		d.Mean = zeroed(d.Mean, n*a)
		d.LogStd = zeroed(d.LogStd, a)
		dPi, logStd = d.Mean, l.out.LogStd
	} else {
		d.Mean, d.LogStd = d.Mean[:0], d.LogStd[:0]
		d.Logits = zeroed(d.Logits, n*a)
		dPi = d.Logits
	}
	pi := l.out.Logits
	if l.gaussian {
		pi = l.out.Mean
	}

	for i := range n {
		row := pi[i*a : (i+1)*a]
		dRow := dPi[i*a : (i+1)*a]
		var logp float64
		if l.gaussian {
			logp = float64(nn.GaussianLogProb(row, logStd, mb.cont[i*a:(i+1)*a]))
		} else {
			logp = float64(nn.CategoricalLogProb(row, mb.actions[i]))
		}

		// Clipped surrogate.
		logRatio := logp - float64(mb.oldLogp[i])
		ratio := math.Exp(logRatio)
		adv := float64(mb.adv[i])
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
				nn.GaussianLogProbGrad(row, logStd, mb.cont[i*a:(i+1)*a], float32(s), dRow, d.LogStd)
			} else {
				nn.CategoricalLogProbGrad(row, mb.actions[i], float32(s), dRow)
			}
		}

		// Entropy bonus. A Gaussian's entropy depends only on the shared
		// log-stds, so its gradient is added once after the loop.
		if !l.gaussian {
			t.entropy += float64(nn.CategoricalEntropy(row))
			if entCoef != 0 {
				nn.CategoricalEntropyGrad(row, float32(-entCoef*inv), dRow)
			}
		}

		// Value loss.
		v, ret := float64(l.out.Values[i]), float64(mb.returns[i])
		diff := v - ret
		loss, dv := 0.5*diff*diff, diff
		if l.cfg.ClipValueLoss {
			old := float64(mb.oldValues[i])
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
	if l.gaussian {
		t.entropy = float64(n) * float64(nn.GaussianEntropy(logStd))
		if entCoef != 0 {
			nn.GaussianEntropyGrad(logStd, float32(-entCoef), d.LogStd)
		}
	}

	t.policy *= inv
	t.value *= inv
	t.entropy *= inv
	t.approxKL *= inv
	t.clipFrac *= inv
	t.total = t.policy + l.cfg.ValueCoef*t.value - entCoef*t.entropy

	clear(grad)
	if err := l.net.Backward(&l.ws, n, d, grad); err != nil {
		return t, fmt.Errorf("ppo: loss gradient: %w", err)
	}
	return t, nil
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
