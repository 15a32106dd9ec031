//go:build linux && amd64

// The host emulator of package emu: device memory, kernels.cu compiled for the host, and a scheduler
// that runs each block's threads as coroutines on the calling OS thread. See doc.go.
// No fused multiply-adds but the kernels' own fmaf: the host rounds as the row headers expect (rowmath.h).
#pragma GCC optimize("fp-contract=off")
#include "cuda_emu.h"

#include "../kernels.cu"

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <utility>

#include "emu.h"

uint3 emu_thread_idx, emu_block_idx;
dim3 emu_block_dim, emu_grid_dim;

// ---- kernel table ------------------------------------------------------------------------------------
// Each kernel's parameters as words: the 8-byte words a launch passes (nn/cuda's kernelArgs), read as the
// driver reads them, sizeof(the parameter) bytes from the word's start.
// Kernels of the emulator's own tests (emu_test.go): what kernels.cu must never do, so that the
// emulator's refusals are tested too.
extern "C" __global__ void emu_test_diverge(int* out) {  // thread 0 leaves before the barrier
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
extern "C" __global__ void emu_test_mixed(int* out) {  // half a warp shuffles, the other half waits at __syncthreads
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
  else
    __syncthreads();
}

extern "C" __global__ void emu_test_race(int* out) {  // every thread writes one word: the last to run wins
  out[0] = (int)threadIdx.x;
}

template <class T>
struct Param;
template <class T>
struct Param<T*> {
  static constexpr char kind = 'p';
  static T* read(uint64_t w) { return reinterpret_cast<T*>(static_cast<uintptr_t>(w)); }
};
template <>
struct Param<int> {
  static constexpr char kind = 'i';
  static int read(uint64_t w) { return static_cast<int>(static_cast<uint32_t>(w)); }
};
template <>
struct Param<float> {
  static constexpr char kind = 'f';
  static float read(uint64_t w) {
    float f;
    const uint32_t b = static_cast<uint32_t>(w);
    memcpy(&f, &b, 4);
    return f;
  }
};
template <>
struct Param<double> {
  static constexpr char kind = 'd';
  static double read(uint64_t w) {
    double d;
    memcpy(&d, &w, 8);
    return d;
  }
};

template <auto F>
struct Call;
template <class... P, void (*F)(P...)>
struct Call<F> {
  static constexpr char kinds[] = {Param<P>::kind..., 0};
  static void run(const uint64_t* w) { run(w, std::index_sequence_for<P...>{}); }
  template <size_t... I>
  static void run(const uint64_t* w, std::index_sequence<I...>) {
    F(Param<P>::read(w[I])...);
  }
};

struct Kernel {
  const char* name;
  void (*run)(const uint64_t*);
  const char* kinds;
  int sync;  // it meets at barriers or shuffles: its threads need stacks of their own
};

#define KERNEL(f, sync) {#f, &Call<&f>::run, Call<&f>::kinds, sync}
static const Kernel kernels[] = {
    KERNEL(dense, 1),           KERNEL(dense_split, 1),     KERNEL(reduce_bias_act, 0),
    KERNEL(conv_forward, 1),    KERNEL(dense_wgrad, 1),     KERNEL(conv_wgrad, 1),
    KERNEL(wgrad_reduce, 0),    KERNEL(dense_dgrad, 1),     KERNEL(col2im, 0),
    KERNEL(act_grad, 0),        KERNEL(sumsq, 1),           KERNEL(sumsq_final, 1),
    KERNEL(adam, 0),            KERNEL(adam_guarded, 0),    KERNEL(ppo_loss, 0),
    KERNEL(term_sums, 1),       KERNEL(surrogate_guard, 1), KERNEL(dqn_loss, 0),
    KERNEL(dqn_guard, 1),       KERNEL(dense_narrow, 1),    KERNEL(categorical, 0),
    KERNEL(gather_rows, 0),     KERNEL(emu_test_diverge, 1), KERNEL(emu_test_mixed, 1),
    KERNEL(emu_test_race, 0),
};
static const int nkernels = sizeof kernels / sizeof kernels[0];

int emu_kernel_count(void) { return nkernels; }
const char* emu_kernel_name(int i) { return kernels[i].name; }
const char* emu_kernel_kinds(int i) { return kernels[i].kinds; }
int emu_kernel_sync(int i) { return kernels[i].sync; }

// ---- device memory -----------------------------------------------------------------------------------
// Every allocation is pages of its own with an inaccessible page after it, and ends (its size rounded up
// to 16 bytes, which keeps every float and double aligned) where that page begins: a kernel that runs off
// the end by more than that rounding faults. (The driver aligns to 256 bytes; nothing here relies on it.)
// New memory is 0xff bytes, NaN as floats, -1 as ints: the driver does not clear it either.
struct Alloc {
  void* base;
  size_t mapped;
  size_t bytes;
};
static std::mutex mem_mu;
static std::map<uintptr_t, Alloc> allocs;  // by address
static const size_t page = 4096;

uintptr_t emu_alloc(size_t n) {
  if (n == 0) return 0;
  const size_t rounded = (n + 15) & ~size_t(15);
  const size_t pages = (rounded + page - 1) / page * page;
  void* base = mmap(nullptr, pages + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return 0;
  mprotect(static_cast<char*>(base) + pages, page, PROT_NONE);
  const uintptr_t p = reinterpret_cast<uintptr_t>(base) + pages - rounded;
  memset(reinterpret_cast<void*>(p), 0xff, rounded);
  std::lock_guard<std::mutex> l(mem_mu);
  allocs[p] = Alloc{base, pages + page, n};
  return p;
}

int emu_free(uintptr_t p) {
  std::lock_guard<std::mutex> l(mem_mu);
  auto it = allocs.find(p);
  if (it == allocs.end()) return -1;
  munmap(it->second.base, it->second.mapped);
  allocs.erase(it);
  return 0;
}

// within: whether [p, p+n) lies in one allocation (mem_mu held).
static bool within(uintptr_t p, size_t n) {
  auto it = allocs.upper_bound(p);
  if (it == allocs.begin()) return false;
  --it;
  return p - it->first + n <= it->second.bytes;
}

int emu_valid(uintptr_t p, size_t n) {
  std::lock_guard<std::mutex> l(mem_mu);
  return within(p, n);
}

// The copies refuse what the driver refuses: a range of device memory outside any one allocation.
int emu_htod(uintptr_t dst, const void* src, size_t n) {
  if (n == 0) return 0;
  if (!emu_valid(dst, n)) return -1;
  memcpy(reinterpret_cast<void*>(dst), src, n);
  return 0;
}

int emu_dtoh(void* dst, uintptr_t src, size_t n) {
  if (n == 0) return 0;
  if (!emu_valid(src, n)) return -1;
  memcpy(dst, reinterpret_cast<const void*>(src), n);
  return 0;
}

int emu_dtod(uintptr_t dst, uintptr_t src, size_t n) {
  if (n == 0) return 0;
  if (!emu_valid(dst, n) || !emu_valid(src, n)) return -1;
  memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return 0;
}

int emu_memset32(uintptr_t dst, uint32_t v, size_t n) {
  if (n == 0) return 0;
  if (!emu_valid(dst, 4 * n)) return -1;
  uint32_t* p = reinterpret_cast<uint32_t*>(dst);
  for (size_t i = 0; i < n; i++) p[i] = v;
  return 0;
}

// ---- coroutines --------------------------------------------------------------------------------------
// emu_switch saves the callee-saved registers on the current stack, stores its pointer in *save, and
// resumes the stack to: what every switch between a block's threads and the scheduler is.
extern "C" void emu_switch(void** save, void* to);
#if defined(__x86_64__)
asm(R"(
  .text
  .p2align 4
  .hidden emu_switch
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");
#else
#error "package emu switches stacks on x86-64 only"
#endif

enum State { RUN, WAIT_BLOCK, WAIT_WARP, DONE };
struct Thread {
  void* sp;
  State state;
};

static const int max_threads = 1024;
static const size_t stack_bytes = 64 << 10;

// The launch in progress (launch_mu held from the launch's start to its end).
static std::mutex launch_mu;
static char* stacks;  // max_threads stacks, each above an inaccessible page
static Thread threads[max_threads];
static uint64_t shfl[max_threads];
static int nthreads, cur;
static void* sched_sp;
static const Kernel* cur_kernel;
static const uint64_t* cur_words;
static bool coroutines;
// reverse: this launch runs each block's threads last to first. It flips with every launch, so that a
// kernel whose result depends on the order its threads run in (a race on a GPU: a read of what another
// thread writes between the same barriers) gives different results from one launch to the next.
static bool reverse;
static unsigned long long launches;
static char launch_err[256];

static void fail(const char* msg) {
  if (launch_err[0] == 0) snprintf(launch_err, sizeof launch_err, "%s", msg);
}

static void set_thread(int t) {
  const unsigned bx = emu_block_dim.x, by = emu_block_dim.y;
  emu_thread_idx = uint3{t % bx, (t / bx) % by, t / (bx * by)};
}

// park parks the running thread in state s and runs the scheduler until it releases it.
static void park(State s) {
  threads[cur].state = s;
  emu_switch(&threads[cur].sp, sched_sp);
}

static void entry() {
  cur_kernel->run(cur_words);
  threads[cur].state = DONE;
  emu_switch(&threads[cur].sp, sched_sp);
  __builtin_trap();  // a finished thread is never resumed
}

void emu_syncthreads() {
  if (!coroutines) {
    if (nthreads > 1) fail("the kernel reached __syncthreads, but its table entry says it has no barriers");
    return;
  }
  park(WAIT_BLOCK);
}

uint64_t emu_shfl_exchange(unsigned mask, uint64_t v, unsigned src) {
  if (!coroutines) {
    fail("the kernel shuffled, but its table entry says it has no barriers");
    return v;
  }
  if (mask != 0xffffffffu) fail("a shuffle whose mask is not the whole warp");
  const int base = cur & ~31;
  shfl[cur] = v;
  park(WAIT_WARP);  // every lane has put its value in
  const uint64_t r = (src < 32 && base + int(src) < nthreads) ? shfl[base + src] : v;
  park(WAIT_WARP);  // and taken its answer out, before any puts the next one in
  return r;
}

// start prepares thread t's stack so that the first switch to it enters entry.
static void start(int t) {
  char* top = stacks + (size_t)(t + 1) * (stack_bytes + page);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                               // entry's return address: it never returns
  *--sp = reinterpret_cast<void*>(&entry);       // emu_switch's ret goes here, the stack as a call leaves it
  for (int i = 0; i < 6; i++) *--sp = nullptr;  // rbp rbx r12-r15
  threads[t].sp = sp;
  threads[t].state = RUN;
}

// run_block runs one block's threads, as coroutines, to their ends.
static void run_block() {
  for (int t = 0; t < nthreads; t++) start(t);
  for (;;) {
    for (int i = 0; i < nthreads; i++) {
      const int t = reverse ? nthreads - 1 - i : i;
      if (threads[t].state != RUN) continue;
      cur = t;
      set_thread(t);
      emu_switch(&sched_sp, threads[t].sp);
    }
    int done = 0, block = 0;
    bool released = false;
    for (int w = 0; w < nthreads; w += 32) {
      int lanes = 0, at = 0, gone = 0;
      for (int t = w; t < nthreads && t < w + 32; t++) {
        lanes++;
        at += threads[t].state == WAIT_WARP;
        gone += threads[t].state == DONE;
      }
      done += gone;
      if (at == 0) continue;
      if (at + gone < lanes) continue;  // some lanes wait at __syncthreads: caught below
      if (gone > 0) {
        fail("a warp shuffled after some of its lanes had exited");
        return;
      }
      for (int t = w; t < w + lanes; t++) threads[t].state = RUN;
      released = true;
    }
    if (released) continue;
    if (done == nthreads) return;
    for (int t = 0; t < nthreads; t++) block += threads[t].state == WAIT_BLOCK;
    if (block + done < nthreads) {
      fail("deadlock: the block's threads wait at different barriers (__syncthreads and a shuffle)");
      return;
    }
    if (done > 0) {
      fail("__syncthreads reached by some of the block's threads after others had exited");
      return;
    }
    for (int t = 0; t < nthreads; t++) threads[t].state = RUN;
  }
}

static bool init_stacks() {
  if (stacks) return true;
  const size_t each = stack_bytes + page;
  void* m = mmap(nullptr, each * max_threads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) return false;
  stacks = static_cast<char*>(m);
  for (int t = 0; t < max_threads; t++) mprotect(stacks + t * each, page, PROT_NONE);  // below stack t
  return true;
}

int emu_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
               const uint64_t* words, int nwords, char* err, int errlen) {
  std::lock_guard<std::mutex> l(launch_mu);
  launch_err[0] = 0;
  const Kernel& kern = kernels[k];
  const int nparams = (int)strlen(kern.kinds);
  const unsigned long long block = (unsigned long long)bx * by * bz;
  if (nwords != nparams) {
    snprintf(err, errlen, "%d arguments for the kernel's %d parameters", nwords, nparams);
    return -1;
  }
  if (gx == 0 || gy == 0 || gz == 0 || block == 0 || block > max_threads || gy > 65535 || gz > 65535) {
    snprintf(err, errlen, "grid %ux%ux%u of blocks %ux%ux%u is not a launch a GPU takes", gx, gy, gz, bx, by, bz);
    return -1;
  }
  {
    std::lock_guard<std::mutex> m(mem_mu);
    for (int i = 0; i < nparams; i++) {
      if (kern.kinds[i] == 'p' && words[i] != 0 && !within(words[i], 1)) {
        snprintf(err, errlen, "argument %d (%#llx) is not in device memory", i, (unsigned long long)words[i]);
        return -1;
      }
    }
  }
  if (kern.sync && !init_stacks()) {
    snprintf(err, errlen, "no memory for the threads' stacks");
    return -1;
  }
  nthreads = (int)block;
  coroutines = kern.sync;
  reverse = launches++ & 1;
  cur_kernel = &kern;
  cur_words = words;
  emu_block_dim = dim3{bx, by, bz};
  emu_grid_dim = dim3{gx, gy, gz};
  for (unsigned z = 0; z < gz && !launch_err[0]; z++)
    for (unsigned y = 0; y < gy && !launch_err[0]; y++)
      for (unsigned x = 0; x < gx && !launch_err[0]; x++) {
        emu_block_idx = uint3{x, y, z};
        if (coroutines) {
          run_block();
          continue;
        }
        for (int i = 0; i < nthreads; i++) {
          cur = reverse ? nthreads - 1 - i : i;
          set_thread(cur);
          kern.run(words);
        }
      }
  if (launch_err[0]) {
    snprintf(err, errlen, "block (%u,%u,%u): %s", emu_block_idx.x, emu_block_idx.y, emu_block_idx.z, launch_err);
    return -1;
  }
  return 0;
}
