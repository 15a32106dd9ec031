// Package emu runs nn/cuda's kernels (kernels.cu) on the host, so that the
// Go code around them (the launches, their arguments, the buffers, the
// copies) runs and is tested on a machine without a GPU: nn/cuda and
// policy/cuda built with the tag cudaemu instead of cuda drive it in place
// of the CUDA driver (docs/gpu.md, "The host emulator").
//
// kernels.cu compiles as host C++ against a small shim (cuda_emu.h).
// A launch runs its blocks one after another on the calling OS thread;
// a block's threads run in turn, each on a stack of its own where the
// kernel meets at __syncthreads or a warp shuffle, so those barriers hold
// as they do on a GPU; every other launch runs them last to first, so a
// result that hangs on the order threads run in (a race between them on a
// GPU) changes from launch to launch. What a GPU would do wrong the emulator reports
// rather than guesses: arguments that are not the kernel's parameters in
// number or kind, pointers outside device memory, copies past an
// allocation's end, barriers some of a block's threads never reach. Reads
// and writes past an allocation's end (rounded up to 16 bytes) fault, as
// each ends at an inaccessible page, and new memory is NaN, as
// uninitialised device memory is garbage.
//
// It is a check of correctness, not a model of a GPU: threads never run at
// once, so a race between them shows only where one of the two orders
// gets it wrong, and nothing it measures says anything of a GPU's speed.
// Linux on x86-64 only (its stacks switch in assembly).
package emu
