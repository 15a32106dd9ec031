// surrogate.h: PPO's loss of one row of a categorical actor-critic and its gradient with respect to the
// row's logits and value, for kernels.cu's ppo_loss and, compiled by the host's C compiler, for the tests
// that check it against package algo/ppo's rowsLoss on any machine (surrogate_host.go).
//
// It is rowsLoss's arithmetic in rowsLoss's order: the log-sum-exp, the surrogate and the value error in
// double, the same float32 roundings where package nn rounds (a log-probability and an entropy are
// float32 there; each gradient element is accumulated in float32), and the same NaN rules: a clip keeps a
// NaN (Go's min and max do), where fmin and fmax would drop it. The one difference is exp and log: nn's
// are polynomials within 1e-14 of them.
#ifndef DISTRL_SURROGATE_H
#define DISTRL_SURROGATE_H

#include "rowmath.h"

// The row's loss terms, in the order of nn.SurrogateStep's sums.
enum { SURR_POLICY, SURR_VALUE, SURR_ENTROPY, SURR_KL, SURR_CLIPFRAC, SURR_TERMS };

// surr_clamp is Go's min(max(x, lo), hi): NaN stays NaN.
ROW_FN double surr_clamp(double x, double lo, double hi) {
  if (isnan(x)) return x;
  return x < lo ? lo : (x > hi ? hi : x);
}

// surr_lse is nn's logSumExp: -Inf when every logit is, NaN when one is NaN.
ROW_FN double surr_lse(const float* l, int a) {
  double mx = -INFINITY;
  for (int i = 0; i < a; i++) {
    const double v = l[i];
    if (isnan(v) || v > mx) mx = v;  // Go's max keeps a NaN
    if (isnan(mx)) break;
  }
  if (isinf(mx) && mx < 0) return mx;
  double s = 0;
  for (int i = 0; i < a; i++) s += exp((double)l[i] - mx);
  return mx + log(s);
}

// surr_entropy is nn's entropy of the row given its log-sum-exp.
ROW_FN double surr_entropy(const float* l, int a, double lse) {
  double h = 0;
  for (int i = 0; i < a; i++) {
    const double lp = (double)l[i] - lse;
    const double p = exp(lp);
    if (p != 0) h -= ROW_DMUL(p, lp);
  }
  return h;
}

// surr_row computes the loss of one row (a actions, logits l, value v; the action taken, the behaviour
// policy's log-probability and value, the advantage and the return) into terms[SURR_TERMS] and the
// gradient of the minibatch's mean loss (inv = 1/rows, value_scale = ValueCoef·inv) into dl[a] and *dv.
ROW_FN void surr_row(const float* l, int a, float v, int act, float old_logp, float old_value, float adv_f,
                      float ret_f, double clip_eps, double inv, double value_scale, double ent_coef,
                      int clip_value, float* dl, float* dv, double* terms) {
  const double lse = surr_lse(l, a);
  for (int j = 0; j < a; j++) dl[j] = 0.f;

  // Clipped surrogate (nn.CategoricalLogProb is a float32).
  const double logp = (double)(float)((double)l[act] - lse);
  const double log_ratio = logp - (double)old_logp;
  const double ratio = exp(log_ratio);
  const double adv = adv_f;
  double surr = ratio * adv;
  const double clipped = surr_clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv;
  double dsurr = 0;
  if (surr <= clipped)
    dsurr = adv * ratio;
  else
    surr = clipped;  // dsurr stays 0: an overflowed ratio is harmless where clipped, 0·Inf is not
  terms[SURR_POLICY] = -surr;
  terms[SURR_KL] = (ratio - 1) - log_ratio;
  terms[SURR_CLIPFRAC] = fabs(ratio - 1) > clip_eps ? 1 : 0;
  if (dsurr != 0) {  // nn.CategoricalLogProbGrad with scale float32(-dsurr·inv)
    const float s32 = (float)(-dsurr * inv);
    const double s = s32;
    for (int j = 0; j < a; j++) dl[j] -= (float)(s * exp((double)l[j] - lse));
    dl[act] += s32;
  }

  // Entropy bonus (nn.CategoricalEntropy is a float32; its gradient is taken with the double).
  const double h = surr_entropy(l, a, lse);
  terms[SURR_ENTROPY] = (double)(float)h;
  if (ent_coef != 0) {  // nn.CategoricalEntropyGrad with scale float32(-ent_coef·inv)
    const double sc = (double)(float)(-ent_coef * inv);
    for (int j = 0; j < a; j++) {
      const double lp = (double)l[j] - lse;
      const double p = exp(lp);
      if (p != 0) dl[j] -= (float)(sc * p * (lp + h));
    }
  }

  // Value loss.
  const double vv = v, ret = ret_f, diff = vv - ret;
  double loss = 0.5 * diff * diff, dvv = diff;
  if (clip_value) {
    const double old = old_value;
    const double vc = old + surr_clamp(vv - old, -clip_eps, clip_eps);
    const double dc = vc - ret;
    // Where the clipped error is the larger, V is outside the clip range and the loss does not depend on it.
    if (dc * dc > diff * diff) {
      loss = 0.5 * dc * dc;
      dvv = 0;
    }
  }
  terms[SURR_VALUE] = loss;
  *dv = (float)(value_scale * dvv);
}

#endif
