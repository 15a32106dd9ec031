// cuda_emu.h: what kernels.cu needs of CUDA C++ to compile as host C++ (package emu). Every block runs
// its threads one after another on one OS thread, each on a stack of its own; __syncthreads and the warp
// shuffle switch to the next thread, so a block's threads meet at a barrier as they do on a GPU.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <cmath>

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
};

// The running thread's indices and the launch's shape: set by the scheduler before it resumes a thread.
extern uint3 emu_thread_idx, emu_block_idx;
extern dim3 emu_block_dim, emu_grid_dim;
#define threadIdx emu_thread_idx
#define blockIdx emu_block_idx
#define blockDim emu_block_dim
#define gridDim emu_grid_dim

#define __global__
#define __device__
#define __forceinline__ inline
// One block runs at a time, so a function's static storage is its block's shared memory.
#define __shared__ static

void emu_syncthreads();
#define __syncthreads() emu_syncthreads()

// emu_shfl_exchange: every lane of the calling warp puts v in and gets back lane src's (its own where
// src is out of the warp); the mask must name the whole warp.
uint64_t emu_shfl_exchange(unsigned mask, uint64_t v, unsigned src);
template <class T>
inline T emu_shfl_down(unsigned mask, T v, unsigned delta) {
  static_assert(sizeof(T) <= 8, "a shuffled value fits 8 bytes");
  uint64_t w = 0;
  memcpy(&w, &v, sizeof v);
  const unsigned lane = (emu_thread_idx.x + emu_block_dim.x * (emu_thread_idx.y + emu_block_dim.y * emu_thread_idx.z)) & 31;
  w = emu_shfl_exchange(mask, w, lane + delta);
  T r;
  memcpy(&r, &w, sizeof r);
  return r;
}
#define __shfl_down_sync(mask, v, delta) emu_shfl_down((mask), (v), (delta))

// fmaf without a library call (it is one without -mfma): the float product is exact in double, so
// this rounds twice where the GPU rounds once, a difference far inside every tolerance the tests hold a
// GPU to. It makes the emulated GEMMs several times faster.
inline float emu_fmaf(float a, float b, float c) { return (float)((double)a * (double)b + (double)c); }
#define fmaf emu_fmaf

using std::isfinite;
using std::isinf;
using std::isnan;
using std::max;
using std::min;
