// Package cuda runs a policy's forward pass on an NVIDIA GPU: a
// [policy.Backend] through CUDA kernels of our own, for policy workers
// configured with `device: cuda:N`.
//
// Everything but this doc is behind the build tag `cuda` (see package
// nn/cuda, whose network and kernels it runs).
//
// A batch is one copy in (observations, and the uniform numbers the
// categorical head samples with), the network's forward pass on the
// device (nn/cuda's Net: convolutions and dense layers), the categorical
// head's kernel (log-sum-exp, inverse-CDF sampling or argmax,
// log-probability), and one copy out (actions, log-probabilities and
// values, or Gaussian means and values). The random numbers are drawn on
// the CPU by the policy from its seeded generator, one per row in row
// order as on the CPU backend, so the same seed gives the same actions.
// Gaussian actions are sampled on the CPU from the copied means.
//
// Parameters are uploaded whole by SetParams, between batches, so a batch
// never sees half of a version. A CUDA context is current on one OS thread:
// every call locks its goroutine to its thread and makes the backend's
// context current there first.
package cuda
