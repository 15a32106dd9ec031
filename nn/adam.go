package nn

import (
	"errors"
	"fmt"
	"math"
)

// Adam is the Adam optimizer (Kingma & Ba, 2015) over a flat parameter
// vector. Its state is exported so that a checkpoint can save and restore
// it exactly; restoring M, V and Step resumes the same trajectory.
//
// The update follows PyTorch's torch.optim.Adam, with eps added to the
// bias-corrected sqrt(v̂), so hyperparameters carry over from PyTorch PPO
// code (which commonly uses Eps = 1e-5 rather than the default 1e-8).
type Adam struct {
	LR, Beta1, Beta2, Eps float32
	M, V                  []float32 // first and second moment estimates
	Step                  int64     // number of updates applied so far
}

// NewAdam returns an Adam optimizer for n parameters with learning rate lr
// and the usual defaults Beta1 = 0.9, Beta2 = 0.999, Eps = 1e-8.
func NewAdam(n int, lr float32) *Adam {
	n = max(n, 0)
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		M: make([]float32, n), V: make([]float32, n)}
}

// Update applies one Adam step to params, in place, for the gradient grad
// of the loss being minimised. It checks lengths and hyperparameters
// before touching anything, so a failed call leaves params and state as
// they were.
func (a *Adam) Update(params, grad []float32) error {
	n := len(a.M)
	if len(a.V) != n || len(params) != n || len(grad) != n {
		return fmt.Errorf("nn: adam: %w: %d params, %d grads, state %d/%d",
			ErrShape, len(params), len(grad), len(a.M), len(a.V))
	}
	if !(a.LR >= 0) || !(a.Beta1 >= 0 && a.Beta1 < 1) || !(a.Beta2 >= 0 && a.Beta2 < 1) || !(a.Eps > 0) {
		return fmt.Errorf("nn: adam: invalid hyperparameters lr=%v beta1=%v beta2=%v eps=%v",
			a.LR, a.Beta1, a.Beta2, a.Eps)
	}
	if a.Step == math.MaxInt64 {
		return errors.New("nn: adam: step counter exhausted")
	}
	a.Step++
	// Bias corrections in float64: in float32, 1 - beta2^t is badly
	// rounded for small t, which is exactly when it matters most.
	t := float64(a.Step)
	c1 := 1 - math.Pow(float64(a.Beta1), t)
	c2 := 1 - math.Pow(float64(a.Beta2), t)
	stepSize := float32(float64(a.LR) / c1)
	invSqrtC2 := float32(1 / math.Sqrt(c2))
	active.adam(params, a.M, a.V, grad, adamStep{a.Beta1, a.Beta2, stepSize, invSqrtC2, a.Eps})
	return nil
}

// vecAdamMin is the parameter count from which the native kernels run the
// Adam step's loop in C (adam.c): below it the cgo call costs more than it
// saves.
const vecAdamMin = 256

// adamStep is what one Adam step's loop needs besides the vectors.
type adamStep struct{ b1, b2, stepSize, invSqrtC2, eps float32 }

// adamGo is the Adam step's loop over equal-length params, m, v and grad.
// The native kernels run the same operations in C (adam.c), bit for bit.
func adamGo(params, m, v, grad []float32, s adamStep) {
	m, v, grad = m[:len(params)], v[:len(params)], grad[:len(params)]
	for i := range params {
		g := grad[i]
		mi := s.b1*m[i] + (1-s.b1)*g
		vi := s.b2*v[i] + (1-s.b2)*g*g
		m[i], v[i] = mi, vi
		params[i] -= s.stepSize * mi / (float32(math.Sqrt(float64(vi)))*s.invSqrtC2 + s.eps)
	}
}

// ClipGradNorm scales grad in place so that its Euclidean norm is at most
// maxNorm, as torch.nn.utils.clip_grad_norm_ does, and returns the norm it
// had before clipping (useful to log). A maxNorm <= 0 disables clipping. A
// non-finite norm is returned as is and grad is left alone, so the caller
// can detect it and skip the update rather than scale everything to NaN.
func ClipGradNorm(grad []float32, maxNorm float32) (norm float32) {
	var ss float64
	for _, g := range grad {
		ss += float64(g) * float64(g)
	}
	n := math.Sqrt(ss)
	if maxNorm > 0 && n > float64(maxNorm) && !math.IsInf(n, 0) {
		// The 1e-6 matches PyTorch and keeps the result just under maxNorm.
		s := float32(float64(maxNorm) / (n + 1e-6))
		for i := range grad {
			grad[i] *= s
		}
	}
	return float32(n)
}
