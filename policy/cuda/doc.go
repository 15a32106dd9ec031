// Package cuda runs a policy's forward pass on an NVIDIA GPU: a
// [policy.Backend] through CUDA kernels of our own, for policy workers
// configured with `device: cuda:N`.
//
// Everything but this doc and the kernels' test is behind the build tag
// `cuda`: gorgonia.org/cu, which binds the CUDA driver API, calls cuInit in
// its init and exits the process when it fails, so a binary that imports it
// cannot even print --help on a machine without a GPU. The CPU rlctl never
// imports this package; `make build-cuda` builds bin/rlctl-cuda, which does.
//
// The kernels are CUDA C (kernels.cu); the PTX nvcc makes of them
// (kernels.ptx, PTX ISA 7.8 for compute_70) is committed and embedded, so
// building needs no nvcc, and the driver compiles it for the GPU at hand.
// `make ptx` regenerates it; a test fails where nvcc is present and the
// committed PTX is not what it makes.
//
// A batch is one copy in (observations, and the uniform numbers the
// categorical head samples with), one kernel launch per layer (a tiled GEMM
// with bias and activation fused, or a warp-per-row kernel for the narrow
// heads), the categorical head's kernel (log-sum-exp, inverse-CDF sampling
// or argmax, log-probability), and one copy out (actions, log-probabilities
// and values, or Gaussian means and values). The random numbers are drawn
// on the CPU by the policy from its seeded generator, one per row in row
// order as on the CPU backend, so the same seed gives the same actions.
// Gaussian actions are sampled on the CPU from the copied means.
//
// Only dense networks run here: Open refuses one with convolutions
// (ErrUnsupported) rather than evaluate it without them.
//
// Parameters are uploaded whole by SetParams, between batches, so a batch
// never sees half of a version. A CUDA context is current on one OS thread:
// every call locks its goroutine to its thread and makes the backend's
// context current there first.
package cuda
