// Package cuda runs package nn's networks on an NVIDIA GPU through CUDA
// kernels of our own (kernels.cu): the forward pass of dense and
// convolutional layers, their backward pass, gradient clipping and Adam.
// Its Engine is an nn.Engine, on which the PPO and DQN learners train
// with `device: cuda:N`; package policy/cuda serves a policy's forward
// pass with its Net.
//
// Everything but this doc, the packing and checking of kernel arguments
// against kernels.ptx (args.go, signatures.go), the host-compiled losses
// and their tests is behind the build tag `cuda`, or `cudaemu`: with that
// tag the host emulator of package nn/cuda/emu stands in for the driver
// (driver_emu.go in driver_cu.go's place), so that the GPU code runs and
// is tested on any machine. gorgonia.org/cu, which binds the CUDA driver API, calls cuInit in
// its init and exits the process when it fails, so a binary that imports it
// cannot even print --help on a machine without a GPU (a test binary goes
// on, its GPU tests skipped: package internal/cudainit). The CPU rlctl
// never imports this package; `make build-cuda` builds bin/rlctl-cuda,
// which does.
//
// The kernels are CUDA C; the PTX nvcc makes of them (kernels.ptx, PTX ISA
// 7.8 for compute_70) is committed and embedded, so building needs no
// nvcc, and the driver compiles it for the GPU at hand. `make ptx`
// regenerates it; a test fails where nvcc is present and the committed PTX
// is not what it makes.
//
// Every matrix product is one tiled GEMM kernel with operands read through
// functors, so a convolution's im2col patches are read where they lie and
// never materialised, and a transposed operand is read coalesced. A
// weight gradient sums over the batch's rows (a convolution's over every
// pixel too): it is split over the rows in slices that are added in order
// afterwards, so that a few output tiles still fill the GPU, without
// atomics: the same inputs give the same bits on every run. The
// gradient's norm is summed in double, as nn does.
//
// A context is current on one OS thread: every call locks its goroutine
// to its thread and makes its context current there first.
package cuda
