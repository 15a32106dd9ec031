// dqnloss.h: DQN's loss of one transition and its gradient with respect to the online network's outputs
// for it, for kernels.cu's dqn_loss and, compiled by the host's C compiler, for the tests that check it
// against package algo/dqn's lossAndGrad on any machine (surrogate_host.go).
//
// It is lossAndGrad's arithmetic in its order: a dueling head's Q-values in float32 as combineQ makes them
// (V + A - mean(A), the mean summed in row order), the first of equal Q-values as the greedy action, the
// target and the Huber loss in double, each gradient element rounded to float32 where the Go rounds it.
#ifndef DISTRL_DQNLOSS_H
#define DISTRL_DQNLOSS_H

#include "rowmath.h"

// The row's loss terms, in the order of nn.DQNStep's sums.
enum { DQN_LOSS, DQN_Q, DQN_TD, DQN_TERMS };

// dqn_shift is what combineQ adds to each logit of a row for its Q-value: V - mean(A) for a dueling head,
// 0 otherwise.
ROW_FN float dqn_shift(const float* l, float v, int a, int dueling) {
  if (!dueling) return 0.f;
  float mean = 0.f;
  for (int i = 0; i < a; i++) mean += l[i];
  mean /= (float)a;
  return v - mean;
}

ROW_FN float dqn_q(const float* l, int i, float shift, int dueling) { return dueling ? l[i] + shift : l[i]; }

// dqn_argmax is dqn.Argmax of the row's Q-values: the first of the largest.
ROW_FN int dqn_argmax(const float* l, int a, float shift, int dueling) {
  int best = 0;
  float qb = dqn_q(l, 0, shift, dueling);
  for (int i = 1; i < a; i++) {
    const float qi = dqn_q(l, i, shift, dueling);
    if (qi > qb) {
      best = i;
      qb = qi;
    }
  }
  return best;
}

// dqn_row computes the loss of one transition of a batch of n: the online network's outputs for its
// observation (l, v) and next observation (ln, vn: read only for double DQN), the target network's for the
// next observation (lt, vt), a actions, the action taken, the n-step reward and discount, the importance
// weight. It writes terms[DQN_TERMS] (this row's shares of the batch's means), *td (|TD error|), and the
// gradient of the batch's weighted mean loss into dl[a] and, for a dueling head, *dv.
ROW_FN void dqn_row(const float* l, float v, const float* ln, float vn, const float* lt, float vt, int a, int act,
                    float reward, float discount, float weight, int n, double delta, int dueling, int double_q,
                    float* dl, float* dv, double* terms, double* td) {
  const float shift_t = dqn_shift(lt, vt, a, dueling);
  int best;
  if (double_q)
    best = dqn_argmax(ln, a, dqn_shift(ln, vn, a, dueling), dueling);
  else
    best = dqn_argmax(lt, a, shift_t, dueling);
  const float boot = dqn_q(lt, best, shift_t, dueling);
  const double y = (double)reward + ROW_DMUL((double)discount, (double)boot);
  const double qa = dqn_q(l, act, dqn_shift(l, v, a, dueling), dueling);
  const double e = qa - y;
  const double w = weight;
  // Huber: e²/2 inside delta, delta(|e| - delta/2) outside.
  double loss, g;
  if (fabs(e) <= delta) {
    loss = e * e / 2;
    g = e;
  } else {
    loss = delta * (fabs(e) - delta / 2);
    g = copysign(delta, e);
  }
  terms[DQN_LOSS] = w * loss / (double)n;
  terms[DQN_Q] = qa / (double)n;
  terms[DQN_TD] = fabs(e) / (double)n;
  *td = fabs(e);
  g *= w / (double)n;
  for (int j = 0; j < a; j++) dl[j] = dueling ? (float)(-g / (double)a) : 0.f;  // dQ(a_i)/dA(a') = 1{a'=a_i} - 1/A
  if (dueling) *dv = (float)g;                                                   // dQ/dV = 1
  dl[act] += (float)g;
}

#endif
