package cuda

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -lm
// No fused multiply-adds: the host rounds every operation as the kernel does.
#pragma GCC optimize("fp-contract=off")
#include "dqnloss.h"
#include "surrogate.h"

static void surr_rows(const float* logits, const float* values, const int* actions, const float* old_logp,
                      const float* old_values, const float* adv, const float* returns, int n, int a,
                      double clip_eps, double value_coef, double ent_coef, int clip_value, float* dlogits,
                      float* dvalues, double* sums) {
  const double inv = 1.0 / n;
  for (int q = 0; q < SURR_TERMS; q++) sums[q] = 0;
  for (int r = 0; r < n; r++) {
    double t[SURR_TERMS];
    surr_row(logits + (size_t)r * a, a, values[r], actions[r], old_logp[r], old_values[r], adv[r], returns[r],
             clip_eps, inv, value_coef * inv, ent_coef, clip_value, dlogits + (size_t)r * a, dvalues + r, t);
    for (int q = 0; q < SURR_TERMS; q++) sums[q] += t[q];
  }
}

static void dqn_rows(const float* l, const float* v, const float* ln, const float* vn, const float* lt,
                     const float* vt, const int* actions, const float* rewards, const float* discounts,
                     const float* weights, int n, int a, double delta, int dueling, int double_q, float* dlogits,
                     float* dvalues, double* sums, double* td) {
  for (int q = 0; q < DQN_TERMS; q++) sums[q] = 0;
  for (int r = 0; r < n; r++) {
    const size_t o = (size_t)r * a;
    double t[DQN_TERMS];
    dqn_row(l + o, v[r], double_q ? ln + o : 0, double_q ? vn[r] : 0.f, lt + o, vt[r], a, actions[r], rewards[r],
            discounts[r], weights[r], n, delta, dueling, double_q, dlogits + o, dvalues + r, t, td + r);
    for (int q = 0; q < DQN_TERMS; q++) sums[q] += t[q];
  }
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/distrl/distrl/nn"
)

// SurrogateRowsHost runs the PPO loss of kernels.cu's ppo_loss
// (surrogate.h), compiled by the host's C compiler, over n rows in order:
// logits [n, a] and values [n] are the network's outputs, rows the loss
// inputs of those same n rows. It writes the gradient of the mean loss
// with respect to the outputs into dLogits and dValues and returns the
// terms summed over the rows. It needs no GPU: it lets a test on any
// machine hold the kernel's arithmetic to the learner's.
func SurrogateRowsHost(logits, values []float32, a int, rows nn.SurrogateRows, loss nn.SurrogateLoss, dLogits, dValues []float32) (nn.SurrogateStep, error) {
	n := len(values)
	if n == 0 || a <= 0 || len(logits) != n*a || len(dLogits) != n*a || len(dValues) != n || len(rows.Actions) != n ||
		len(rows.OldLogp) != n || len(rows.OldValues) != n || len(rows.Adv) != n || len(rows.Returns) != n {
		return nn.SurrogateStep{}, fmt.Errorf("cuda: surrogate on the host: %w", nn.ErrShape)
	}
	for _, act := range rows.Actions {
		if act < 0 || int(act) >= a {
			return nn.SurrogateStep{}, fmt.Errorf("cuda: surrogate on the host: %w: action %d of %d", nn.ErrShape, act, a)
		}
	}
	var sums [5]C.double
	clip := C.int(0)
	if loss.ClipValue {
		clip = 1
	}
	f := func(s []float32) *C.float { return (*C.float)(unsafe.Pointer(&s[0])) }
	C.surr_rows(f(logits), f(values), (*C.int)(unsafe.Pointer(&rows.Actions[0])), f(rows.OldLogp), f(rows.OldValues),
		f(rows.Adv), f(rows.Returns), C.int(n), C.int(a), C.double(loss.ClipEps), C.double(loss.ValueCoef),
		C.double(loss.EntropyCoef), clip, f(dLogits), f(dValues), &sums[0])
	return nn.SurrogateStep{Policy: float64(sums[0]), Value: float64(sums[1]), Entropy: float64(sums[2]),
		ApproxKL: float64(sums[3]), ClipFrac: float64(sums[4])}, nil
}

// DQNOutputs are a network's outputs for n rows: logits [n, actions] and
// values [n].
type DQNOutputs struct{ Logits, Values []float32 }

// DQNRowsHost runs the DQN loss of kernels.cu's dqn_loss (dqnloss.h),
// compiled by the host's C compiler, over the batch's n transitions in
// order, from the online network's outputs for the observations (online)
// and the next ones (next: read for loss.Double only) and the target's
// for the next ones (target). It writes the gradient of the batch's mean
// loss with respect to online's outputs into dLogits and (dueling)
// dValues, each transition's |TD error| into td, and returns the terms
// summed over the rows (the norm left 0). It needs no GPU.
func DQNRowsHost(online, next, target DQNOutputs, a int, b nn.DQNBatch, loss nn.DQNLoss, dLogits, dValues []float32, td []float64) (nn.DQNStep, error) {
	n := len(b.Actions)
	outs := []DQNOutputs{online, target}
	if loss.Double {
		outs = append(outs, next)
	}
	ok := n > 0 && a > 0 && len(b.Rewards) == n && len(b.Discounts) == n && len(b.Weights) == n &&
		len(dLogits) == n*a && len(dValues) == n && len(td) == n
	for _, o := range outs {
		ok = ok && len(o.Logits) == n*a && len(o.Values) == n
	}
	if !ok {
		return nn.DQNStep{}, fmt.Errorf("cuda: dqn loss on the host: %w", nn.ErrShape)
	}
	for _, act := range b.Actions {
		if act < 0 || int(act) >= a {
			return nn.DQNStep{}, fmt.Errorf("cuda: dqn loss on the host: %w: action %d of %d", nn.ErrShape, act, a)
		}
	}
	f := func(s []float32) *C.float {
		if len(s) == 0 {
			return nil
		}
		return (*C.float)(unsafe.Pointer(&s[0]))
	}
	flag := func(b bool) C.int {
		if b {
			return 1
		}
		return 0
	}
	var sums [3]C.double
	C.dqn_rows(f(online.Logits), f(online.Values), f(next.Logits), f(next.Values), f(target.Logits), f(target.Values),
		(*C.int)(unsafe.Pointer(&b.Actions[0])), f(b.Rewards), f(b.Discounts), f(b.Weights), C.int(n), C.int(a),
		C.double(loss.HuberDelta), flag(loss.Dueling), flag(loss.Double), f(dLogits), f(dValues), &sums[0],
		(*C.double)(unsafe.Pointer(&td[0])))
	return nn.DQNStep{Loss: float64(sums[0]), MeanQ: float64(sums[1]), MeanTD: float64(sums[2])}, nil
}
