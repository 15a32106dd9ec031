// Package cudainit initialises the CUDA driver before gorgonia.org/cu does,
// to fail with a message a user can act on.
//
// gorgonia.org/cu calls cuInit in its init and, when that fails, prints a
// link and an error name and exits 1. Packages are initialised in the
// order of their import paths, once their own imports are, and this one
// (github.com/...) imports nothing cu does not, so its init runs first: on
// failure it prints one line, "rlctl-cuda: CUDA unavailable: cuInit: no
// CUDA-capable device is detected (CUDA_ERROR_NO_DEVICE)", and exits with
// ExitUnavailable. In a test binary (its name ends in .test) it says SKIP
// and exits 0 instead, so that `go test -tags cuda` on a machine without a
// GPU reports what it could not run rather than failing.
//
// Everything but this doc is behind the build tag `cuda`.
package cudainit

// ExitUnavailable is the exit status of a binary whose CUDA driver did not
// initialise: no driver, no device, or a driver too old.
const ExitUnavailable = 3
