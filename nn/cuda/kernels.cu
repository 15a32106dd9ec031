// Kernels of distrl's CUDA backends (package nn/cuda: the forward and backward passes and Adam of
// package nn's networks; package policy/cuda: a policy's forward pass and categorical head). Built to PTX
// by `make ptx`:
//   nvcc -ptx -arch=compute_70 -o kernels.ptx kernels.cu
// The PTX is committed and embedded, so building never needs nvcc; the driver JIT-compiles it for the
// GPU it runs on. Matrices are row-major float32, as in package nn: x [n,k], w [k,m], y [n,m]; images are
// channels last, [n, H, W, C].
//
// Every integer argument is an int and every real one a float or a double: the Go side passes each as an
// 8-byte word (gorgonia.org/cu copies 8 bytes per argument), whose low 4 bytes are an int's or a float's.
#include <math_constants.h>

#include "dqnloss.h"
#include "surrogate.h"

// act: 0 none, 1 tanh, 2 relu (policy/cuda's activation codes).
__device__ __forceinline__ float activate(float v, int act) {
  if (act == 1) return tanhf(v);
  if (act == 2) return fmaxf(v, 0.f);
  return v;
}

// The tiled GEMM every matrix product here is: C[r][c] = sum over kk in [k0, k1) of A(r, kk)·B(kk, c), for
// r < M and c < N, in 64x64 tiles of C per block of 16x16 threads, each thread a 4x4 register block (rows
// ty+16i, columns tx+16j: neighbouring threads read neighbouring shared-memory words), over k in steps of
// 16 through shared memory. A and B are functors that read an element (an im2col patch is read where it
// lies, never materialised); AT says A's memory runs along r (a transposed operand), BT that B's runs
// along kk, so that the 256 threads' loads of a tile are coalesced either way. The epilogue gets each
// element of C once.
#define BM 64
#define BN 64
#define BK 16
template <bool AT, bool BT, class A, class B, class Epi>
__device__ __forceinline__ void gemm(const A& a, const B& b, const Epi& epi, int M, int N, int k0, int k1) {
  __shared__ float as[BK][BM + 1];  // A tile, transposed; +1 keeps the transposing stores off one bank
  __shared__ float bs[BK][BN + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
  for (int kb = k0; kb < k1; kb += BK) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const int idx = t + 256 * l;
      // A: 16 consecutive threads read one row's 16 values, or (AT) 64 one k's 64 rows.
      const int r = AT ? (idx & 63) : (idx >> 4), kk = AT ? (idx >> 6) : (idx & 15);
      const int gr = row0 + r, gk = kb + kk;
      as[kk][r] = (gr < M && gk < k1) ? a(gr, gk) : 0.f;
      // B: 64 consecutive threads read one k's 64 columns, or (BT) 16 one column's 16 values.
      const int kw = BT ? (idx & 15) : (idx >> 6), c = BT ? (idx >> 4) : (idx & 63);
      const int gkw = kb + kw, gc = col0 + c;
      bs[kw][c] = (gkw < k1 && gc < N) ? b(gkw, gc) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; j++) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int r = row0 + ty + 16 * i;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int c = col0 + tx + 16 * j;
      if (c < N) epi(r, c, acc[i][j]);
    }
  }
}

// Operands.
struct RowMajor {  // p[r][k] of a matrix with ld columns
  const float* p;
  int ld;
  __device__ float operator()(int r, int k) const { return p[(size_t)r * ld + k]; }
};
struct ColMajor {  // the transpose of a row-major matrix with ld columns: p[k][r]
  const float* p;
  int ld;
  __device__ float operator()(int r, int k) const { return p[(size_t)k * ld + r]; }
};
// One convolution's shapes (nn's convGeom).
struct Geom {
  int inH, inW, inC, outH, outW, k, stride, pad;
  __device__ int cols() const { return k * k * inC; }
  __device__ int pixels() const { return outH * outW; }
};
// Im2col reads the im2col matrix of images x ([n, inH, inW, inC]) where it lies: row (img, oy, ox),
// column (ky, kx, c), zero over the padding, as nn's lower lays it out.
struct Im2col {
  const float* x;
  Geom g;
  __device__ float operator()(int row, int col) const {
    const int img = row / g.pixels(), pix = row - img * g.pixels();
    const int oy = pix / g.outW, ox = pix - oy * g.outW;
    const int run = g.k * g.inC, ky = col / run, rem = col - ky * run, kx = rem / g.inC, c = rem - kx * g.inC;
    const int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
    if (iy < 0 || iy >= g.inH || ix < 0 || ix >= g.inW) return 0.f;
    return x[(((size_t)img * g.inH + iy) * g.inW + ix) * g.inC + c];
  }
};
template <class L>
struct Transposed {  // L's transpose
  L l;
  __device__ float operator()(int r, int k) const { return l(k, r); }
};
template <class L>
struct OnesBelow {  // L with a row of ones appended as row `rows`: the bias's row of a weight gradient
  L l;
  int rows;
  __device__ float operator()(int r, int k) const { return r < rows ? l(r, k) : 1.f; }
};

// Epilogues.
struct StoreAct {  // y = act(c + b)
  float* y;
  const float* b;
  int ld, act;
  __device__ void operator()(int r, int c, float v) const { y[(size_t)r * ld + c] = activate(v + b[c], act); }
};
struct StoreBeta {  // y = c + beta·y, beta 0 or 1 (0 never reads y, which may be garbage)
  float* y;
  int ld, beta;
  __device__ void operator()(int r, int c, float v) const {
    const size_t i = (size_t)r * ld + c;
    y[i] = beta ? v + y[i] : v;
  }
};

// dense: y = act(x @ w + b) for outputs wider than a head.
extern "C" __global__ void dense(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int n, int k, int m,
                                 int act) {
  gemm<false, false>(RowMajor{x, k}, RowMajor{w, m}, StoreAct{y, b, m, act}, n, m, 0, k);
}

// dense_split and reduce_bias_act: dense for a batch too small to fill the GPU with output tiles (a
// 1024-wide input to 128 outputs at 512 rows is 16 tiles for 132 multiprocessors): block z sums
// k in [z·chunk, (z+1)·chunk) into its slice of part ([splits, n, m]); reduce_bias_act adds the slices
// in order, the bias, and the activation.
extern "C" __global__ void dense_split(const float* __restrict__ x, const float* __restrict__ w,
                                       float* __restrict__ part, int n, int k, int m, int chunk) {
  const int z = blockIdx.z, k0 = z * chunk, k1 = min(k, k0 + chunk);
  gemm<false, false>(RowMajor{x, k}, RowMajor{w, m}, StoreBeta{part + (size_t)z * n * m, m, 0}, n, m, k0, k1);
}

extern "C" __global__ void reduce_bias_act(const float* __restrict__ part, int splits, int n, int m,
                                           const float* __restrict__ b, float* __restrict__ y, int act) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t size = (size_t)n * m;
  if (i >= size) return;
  float s = 0.f;
  for (int z = 0; z < splits; z++) s += part[z * size + i];
  y[i] = activate(s + b[i % m], act);
}

// conv_forward: y = act(im2col(x) @ w + b) for n images x, y [n, outH, outW, m] channels last: nn's
// forwardConv in one launch, the patches read in place.
extern "C" __global__ void conv_forward(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ y, int n, int inH,
                                        int inW, int inC, int outH, int outW, int k, int stride, int pad,
                                        int m, int act) {
  const Geom g{inH, inW, inC, outH, outW, k, stride, pad};
  gemm<false, false>(Im2col{x, g}, RowMajor{w, m}, StoreAct{y, b, m, act}, n * g.pixels(), m, 0, g.cols());
}

// Weight gradients, split over k (the batch's rows, which can be tens of thousands against a few output
// tiles): block z sums rows [z·chunk, (z+1)·chunk) of Aᵀ·dy into its own slice of part, [in+1, m] with
// the bias's gradient (dy's column sums) as row in; wgrad_reduce adds the slices, in order, to the
// gradient. Deterministic: no atomics, the same sums in the same order on every run.
extern "C" __global__ void dense_wgrad(const float* __restrict__ x, const float* __restrict__ dy,
                                       float* __restrict__ part, int n, int in, int m, int chunk) {
  const int z = blockIdx.z, k0 = z * chunk, k1 = min(n, k0 + chunk);
  gemm<true, false>(OnesBelow<Transposed<RowMajor>>{{RowMajor{x, in}}, in}, RowMajor{dy, m},
                    StoreBeta{part + (size_t)z * (in + 1) * m, m, 0}, in + 1, m, k0, k1);
}

extern "C" __global__ void conv_wgrad(const float* __restrict__ x, const float* __restrict__ dy,
                                      float* __restrict__ part, int n, int inH, int inW, int inC, int outH,
                                      int outW, int k, int stride, int pad, int m, int chunk) {
  const Geom g{inH, inW, inC, outH, outW, k, stride, pad};
  const int rows = n * g.pixels(), z = blockIdx.z, k0 = z * chunk, k1 = min(rows, k0 + chunk);
  gemm<true, false>(OnesBelow<Transposed<Im2col>>{{Im2col{x, g}}, g.cols()}, RowMajor{dy, m},
                    StoreBeta{part + (size_t)z * (g.cols() + 1) * m, m, 0}, g.cols() + 1, m, k0, k1);
}

// wgrad_reduce: gw[r][c] += Σ_z part[z][r][c] for r < in, gb[c] += Σ_z part[z][in][c].
extern "C" __global__ void wgrad_reduce(const float* __restrict__ part, int splits, int in, int m,
                                        float* __restrict__ gw, float* __restrict__ gb) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int size = (in + 1) * m;
  if (i >= size) return;
  float s = 0.f;
  for (int z = 0; z < splits; z++) s += part[(size_t)z * size + i];
  if (i < in * m)
    gw[i] += s;
  else
    gb[i - in * m] += s;
}

// dense_dgrad: dx = dy @ wᵀ (+ dx where beta is 1), dy [n, m], w [in, m], dx [n, in]: the gradient
// with respect to a layer's input, or for a convolution with respect to its patches.
extern "C" __global__ void dense_dgrad(const float* __restrict__ dy, const float* __restrict__ w,
                                       float* __restrict__ dx, int n, int in, int m, int beta) {
  gemm<false, true>(RowMajor{dy, m}, ColMajor{w, m}, StoreBeta{dx, in, beta}, n, in, 0, m);
}

// col2im: dx = the gradient of n images from that of their patches dcol ([n·outH·outW, k·k·inC]): each
// input element sums the patch elements it was read into, one thread per element (no atomics).
extern "C" __global__ void col2im(const float* __restrict__ dcol, float* __restrict__ dx, int n, int inH,
                                  int inW, int inC, int outH, int outW, int k, int stride, int pad) {
  const Geom g{inH, inW, inC, outH, outW, k, stride, pad};
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)n * inH * inW * inC) return;
  const int c = i % inC, ix = (i / inC) % inW, iy = (i / ((size_t)inC * inW)) % inH;
  const int img = i / ((size_t)inC * inW * inH);
  float s = 0.f;
  for (int ky = 0; ky < k; ky++) {
    const int ty = iy + pad - ky;
    if (ty < 0 || ty % stride) continue;
    const int oy = ty / stride;
    if (oy >= outH) continue;
    for (int kx = 0; kx < k; kx++) {
      const int tx = ix + pad - kx;
      if (tx < 0 || tx % stride) continue;
      const int ox = tx / stride;
      if (ox >= outW) continue;
      const size_t row = ((size_t)img * outH + oy) * outW + ox;
      s += dcol[row * g.cols() + (ky * k + kx) * inC + c];
    }
  }
  dx[i] = s;
}

// act_grad: dy *= act'(·), written through the activation's output y as nn's activateGrad: 1 - y² for
// tanh, y > 0 for ReLU (NaN passes).
extern "C" __global__ void act_grad(const float* __restrict__ y, float* __restrict__ dy, int n, int act) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = y[i];
  if (act == 1)
    dy[i] *= 1.f - v * v;
  else if (act == 2 && v == 0.f)  // off; a NaN output passes its gradient, as in nn
    dy[i] = 0.f;
}

// sumsq: partial[block] = Σ g[i]² over the block's grid-stride share, in double, as nn's ClipGradNorm
// sums; sumsq_final adds the partials in order in one block. Deterministic.
#define NORM_THREADS 256
// block_sum adds v over the block's NORM_THREADS threads, pairwise in a fixed order; every thread gets the sum.
__device__ __forceinline__ double block_sum(double* s, double v) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int o = NORM_THREADS / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    __syncthreads();
  }
  const double sum = s[0];
  __syncthreads();
  return sum;
}

extern "C" __global__ void sumsq(const float* __restrict__ g, int n, double* __restrict__ partial) {
  __shared__ double s[NORM_THREADS];
  double acc = 0;
  for (int i = blockIdx.x * NORM_THREADS + threadIdx.x; i < n; i += gridDim.x * NORM_THREADS)
    acc += (double)g[i] * (double)g[i];
  const double sum = block_sum(s, acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}
extern "C" __global__ void sumsq_final(double* __restrict__ partial, int n) {
  __shared__ double s[NORM_THREADS];
  double acc = 0;
  for (int i = threadIdx.x; i < n; i += NORM_THREADS) acc += partial[i];
  // Every thread has read its partials before block_sum's first barrier, so thread 0 may overwrite partial[0].
  const double sum = block_sum(s, acc);
  if (threadIdx.x == 0) partial[0] = sum;
}

// adam: one step of nn.Adam.Update on n parameters, with the gradient first scaled by scale (the clip
// factor of nn.ClipGradNorm, 1 for none); step_size and inv_sqrt_c2 carry the bias corrections, computed
// on the host in double as nn does.
__device__ __forceinline__ void adam_at(int i, float* __restrict__ p, const float* __restrict__ g,
                                        float* __restrict__ m, float* __restrict__ v, float scale, float b1,
                                        float b2, float eps, float step_size, float inv_sqrt_c2) {
  const float gi = scale == 1.f ? g[i] : g[i] * scale;
  const float mi = b1 * m[i] + (1.f - b1) * gi;
  const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  p[i] -= step_size * mi / (sqrtf(vi) * inv_sqrt_c2 + eps);
}

extern "C" __global__ void adam(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                                float* __restrict__ v, int n, float scale, float b1, float b2, float eps,
                                float step_size, float inv_sqrt_c2) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) adam_at(i, p, g, m, v, scale, b1, b2, eps, step_size, inv_sqrt_c2);
}

// adam_guarded: adam with the clip factor the step's guard (surrogate_guard) left in ctl, skipped once a
// guard has stopped the steps (ctl->stop != 0): the host queues a whole update's steps without looking.
struct StepControl {
  int stop;     // 1 + the first step whose norm or loss was not finite; 0 while every one was
  float scale;  // the clip factor of the step being taken
};
extern "C" __global__ void adam_guarded(float* __restrict__ p, const float* __restrict__ g,
                                        float* __restrict__ m, float* __restrict__ v, int n,
                                        const StepControl* __restrict__ ctl, float b1, float b2, float eps,
                                        float step_size, float inv_sqrt_c2) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || ctl->stop != 0) return;
  adam_at(i, p, g, m, v, ctl->scale, b1, b2, eps, step_size, inv_sqrt_c2);
}

// The PPO minibatch step on the device (nn.SurrogateLoss): ppo_loss computes every row's loss terms and
// the loss's gradient with respect to the logits and values (surrogate.h, one thread per row, the rows
// idx of the staged update); term_sums adds each term over the rows, in one block, in a fixed order, into
// the step's record (term_sums); surrogate_guard, after the gradient's sumsq, finishes its norm, checks the norm
// and the loss, sets the clip factor and stops the steps at the first non-finite one. A record is
// {policy, value, entropy, approx_kl, clip_frac (sums), norm, total, spare}, in double. DQN's update
// (dqn_loss, term_sums, dqn_guard) is one such step; its record is {loss, mean Q, mean |TD| (sums of the
// rows' shares), norm, ..., applied}.
#define STEP_RECORD 8
extern "C" __global__ void ppo_loss(const float* __restrict__ logits, const float* __restrict__ values,
                                    const int* __restrict__ idx, const int* __restrict__ actions,
                                    const float* __restrict__ old_logp, const float* __restrict__ old_values,
                                    const float* __restrict__ adv, const float* __restrict__ returns, int n,
                                    int a, double clip_eps, double inv, double value_scale, double ent_coef,
                                    int clip_value, float* __restrict__ dlogits, float* __restrict__ dvalues,
                                    double* __restrict__ terms) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const int j = idx[r];
  double t[SURR_TERMS];
  surr_row(logits + (size_t)r * a, a, values[r], actions[j], old_logp[j], old_values[j], adv[j], returns[j],
           clip_eps, inv, value_scale, ent_coef, clip_value, dlogits + (size_t)r * a, dvalues + r, t);
#pragma unroll
  for (int q = 0; q < SURR_TERMS; q++) terms[(size_t)q * n + r] = t[q];
}

// term_sums: record[q] = Σ_i terms[q][i] for the k terms of n rows, in one block, in a fixed order.
extern "C" __global__ void term_sums(const double* __restrict__ terms, int n, int k, double* __restrict__ record) {
  __shared__ double s[NORM_THREADS];
  for (int q = 0; q < k; q++) {
    double acc = 0;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) acc += terms[(size_t)q * n + i];
    const double sum = block_sum(s, acc);
    if (threadIdx.x == 0) record[q] = sum;
  }
}

// guard_norm: the gradient's norm from sumsq's nb partials (every thread of the block calls it; thread 0
// gets it) and, in ctl, nn.ClipGradNorm's clip factor for it.
__device__ __forceinline__ double guard_norm(const double* __restrict__ partial, int nb, float max_norm,
                                             StepControl* __restrict__ ctl) {
  __shared__ double s[NORM_THREADS];
  double acc = 0;
  for (int i = threadIdx.x; i < nb; i += NORM_THREADS) acc += partial[i];
  const double norm = sqrt(block_sum(s, acc));
  if (threadIdx.x == 0) {
    float scale = 1.f;
    if (max_norm > 0 && norm > (double)max_norm && !isinf(norm)) scale = (float)((double)max_norm / (norm + 1e-6));
    ctl->scale = scale;
  }
  return norm;
}

extern "C" __global__ void surrogate_guard(const double* __restrict__ partial, int nb, double* __restrict__ record,
                                           int step, float max_norm, double inv, double value_coef,
                                           double ent_coef, StepControl* __restrict__ ctl) {
  const float norm32 = (float)guard_norm(partial, nb, max_norm, ctl);  // what nn.ClipGradNorm returns
  if (threadIdx.x != 0) return;
  // The learner's total: the means' policy + ValueCoef·value - EntropyCoef·entropy.
  const double total = record[SURR_POLICY] * inv + value_coef * (record[SURR_VALUE] * inv) -
                       ent_coef * (record[SURR_ENTROPY] * inv);
  record[SURR_TERMS] = norm32;
  record[SURR_TERMS + 1] = total;
  if (ctl->stop == 0 && (isnan(norm32) || isinf(norm32) || isnan(total))) ctl->stop = step + 1;
}

// dqn_loss: every transition's loss terms, |TD error| and the loss's gradient with respect to the online
// network's outputs for its observation (dqnloss.h), one thread a row. The outputs are the online
// network's for the observations (l, v) and the next ones (ln, vn; null unless double_q), the target's for
// the next ones (lt, vt); dvalues is null unless dueling.
extern "C" __global__ void dqn_loss(const float* __restrict__ l, const float* __restrict__ v,
                                    const float* __restrict__ ln, const float* __restrict__ vn,
                                    const float* __restrict__ lt, const float* __restrict__ vt,
                                    const int* __restrict__ actions, const float* __restrict__ rewards,
                                    const float* __restrict__ discounts, const float* __restrict__ weights, int n,
                                    int a, double delta, int dueling, int double_q, float* __restrict__ dlogits,
                                    float* __restrict__ dvalues, double* __restrict__ terms, double* __restrict__ td) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const size_t o = (size_t)r * a;
  double t[DQN_TERMS];
  float dv = 0.f;
  dqn_row(l + o, v[r], double_q ? ln + o : nullptr, double_q ? vn[r] : 0.f, lt + o, vt[r], a, actions[r],
          rewards[r], discounts[r], weights[r], n, delta, dueling, double_q, dlogits + o, &dv, t, td + r);
  if (dvalues) dvalues[r] = dv;
#pragma unroll
  for (int q = 0; q < DQN_TERMS; q++) terms[(size_t)q * n + r] = t[q];
}

// dqn_guard: the update's norm into its record, and the step stopped if the loss or the norm is not
// finite (the learner's checks, before and after the backward pass); record[7] says whether it goes on.
extern "C" __global__ void dqn_guard(const double* __restrict__ partial, int nb, double* __restrict__ record,
                                     float max_norm, StepControl* __restrict__ ctl) {
  const float norm32 = (float)guard_norm(partial, nb, max_norm, ctl);
  if (threadIdx.x != 0) return;
  record[DQN_TERMS] = norm32;
  const bool bad = !isfinite(record[DQN_LOSS]) || !isfinite(norm32);
  ctl->stop = bad ? 1 : 0;
  record[STEP_RECORD - 1] = bad ? 0 : 1;
}

// dense_narrow: y = act(x @ w + b) for m <= NARROW outputs (the policy and value heads), one warp per
// row: the lanes stride over k and the sums meet by shuffles. A 64x64 tile would leave most threads idle.
#define NARROW 8
extern "C" __global__ void dense_narrow(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ y, int n, int k,
                                        int m, int act) {
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= n) return;
  float acc[NARROW];
#pragma unroll
  for (int j = 0; j < NARROW; j++) acc[j] = 0.f;
  const float* xr = x + (size_t)r * k;
  for (int i = lane; i < k; i += 32) {
    const float v = xr[i];
#pragma unroll
    for (int j = 0; j < NARROW; j++)
      if (j < m) acc[j] = fmaf(v, w[(size_t)i * m + j], acc[j]);
  }
#pragma unroll
  for (int j = 0; j < NARROW; j++) {
    if (j >= m) break;
    float s = acc[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) y[(size_t)r * m + j] = activate(s + b[j], act);
  }
}

// categorical: the categorical head, one thread per row. From the row's logits it computes the
// log-sum-exp in double (as nn does), then either draws the action whose cumulative probability first
// exceeds the uniform u[r] (nn.SampleCategoricalWith, the same inverse CDF, walked the same way) or, where u is null, takes
// the greedy action (the first largest logit, as nn.GreedyCategorical). It writes the action and its
// log-probability; a row whose logits hold a NaN or are all -Inf gets action -1 and a NaN.
extern "C" __global__ void categorical(const float* __restrict__ logits, const double* __restrict__ u,
                                       int n, int a, int* __restrict__ actions, float* __restrict__ logp) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const float* l = logits + (size_t)r * a;
  double mx = -CUDART_INF;
  bool nan = false;
  for (int i = 0; i < a; i++) {
    const double v = l[i];
    nan |= isnan(v);
    mx = fmax(mx, v);
  }
  if (nan || isinf(mx)) {
    actions[r] = -1;
    logp[r] = CUDART_NAN_F;
    return;
  }
  double s = 0;
  for (int i = 0; i < a; i++) s += exp((double)l[i] - mx);
  const double lse = mx + log(s);
  int act = -1;
  if (u == nullptr) {
    for (int i = 0; i < a; i++)
      if (act < 0 || l[i] > l[act]) act = i;
  } else {
    // u·Σe_i against the running sum of e_i = exp(l_i - max), as nn does.
    const double target = u[r] * s;
    double c = 0;
    int last = -1;
    for (int i = 0; i < a; i++) {
      const double e = exp((double)l[i] - mx);
      if (e > 0) last = i;
      c += e;
      if (target < c) {
        act = i;
        break;
      }
    }
    if (act < 0) act = last;  // rounding left the sum a hair below the target: the last possible action
  }
  actions[r] = act;
  logp[r] = act < 0 ? CUDART_NAN_F : (float)((double)l[act] - lse);
}

// gather_rows: dst[i] = src[idx[i]] for n rows of d values: a minibatch of the observations an update
// staged on the device.
extern "C" __global__ void gather_rows(const float* __restrict__ src, const int* __restrict__ idx,
                                       float* __restrict__ dst, int n, int d) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)n * d) return;
  const size_t r = i / d, c = i - r * d;
  dst[i] = src[(size_t)idx[r] * d + c];
}
