// Kernels of distrl's CUDA policy backend (package policy/cuda). Built to PTX by `make ptx`:
//   nvcc -ptx -arch=compute_70 -o kernels.ptx kernels.cu
// The PTX is committed and embedded, so building never needs nvcc; the driver JIT-compiles it for the
// GPU it runs on. Matrices are row-major float32, as in package nn: x [n,k], w [k,m], y [n,m].

#include <math_constants.h>

// act: 0 none, 1 tanh, 2 relu (policy/cuda's activation codes).
__device__ __forceinline__ float activate(float v, int act) {
  if (act == 1) return tanhf(v);
  if (act == 2) return fmaxf(v, 0.f);
  return v;
}

// dense: y = act(x @ w + b) for outputs wider than a head. Blocks of 16x16 threads compute 64x64 tiles
// of y, each thread a 4x4 register block (rows ty+16i, columns tx+16j: neighbouring threads read
// neighbouring shared-memory words), over k in steps of 16.
#define BM 64
#define BN 64
#define BK 16
extern "C" __global__ void dense(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int n, int k, int m,
                                 int act) {
  __shared__ float xs[BK][BM + 1];  // x tile, transposed; +1 keeps the transposing stores off one bank
  __shared__ float ws[BK][BN];
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
  for (int k0 = 0; k0 < k; k0 += BK) {
#pragma unroll
    for (int l = 0; l < 4; l++) {
      const int idx = t + 256 * l;
      const int r = idx >> 4, kk = idx & 15;  // x: 16 consecutive threads read one row's 16 values
      const int gr = row0 + r, gk = k0 + kk;
      xs[kk][r] = (gr < n && gk < k) ? x[(size_t)gr * k + gk] : 0.f;
      const int kw = idx >> 6, c = idx & 63;  // w: 64 consecutive threads read one row's 64 values
      const int gkw = k0 + kw, gc = col0 + c;
      ws[kw][c] = (gkw < k && gc < m) ? w[(size_t)gkw * m + gc] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      float a[4], bb[4];
#pragma unroll
      for (int i = 0; i < 4; i++) a[i] = xs[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; j++) bb[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(a[i], bb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int r = row0 + ty + 16 * i;
    if (r >= n) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int c = col0 + tx + 16 * j;
      if (c < m) y[(size_t)r * m + c] = activate(acc[i][j] + b[c], act);
    }
  }
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
