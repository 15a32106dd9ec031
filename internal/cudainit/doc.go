// Package cudainit initialises the CUDA driver before gorgonia.org/cu does,
// to fail with a message a user can act on.
//
// gorgonia.org/cu calls cuInit in its init and, when that fails, prints a
// link and an error name and exits 1. Packages are initialised in the
// order of their import paths, once their own imports are, and this one
// (github.com/...) imports nothing cu does not, so its init runs first: on
// failure it prints one line, "rlctl-cuda: CUDA unavailable: cuInit: no
// CUDA-capable device is detected (CUDA_ERROR_NO_DEVICE)", and exits with
// ExitUnavailable.
//
// A test binary (its name ends in .test) goes on instead, so that its tests
// that need no GPU run and those that do say SKIP with the reason (Err)
// in `go test -v` and `-json`: this package defines cuInit itself, which
// every caller in the process then reaches in place of the driver's (an
// executable's symbols come before a shared library's), calls the
// driver's, and in a test binary answers success to cu's init whatever the
// driver said. The driver stays uninitialised, so nothing can use it by
// mistake: every later call fails with CUDA_ERROR_NOT_INITIALIZED.
//
// Everything but this doc is behind the build tag `cuda`; with the tag
// cudaemu (nn/cuda's host emulator) there is no driver to initialise and
// Err is nil.
package cudainit

// ExitUnavailable is the exit status of a binary whose CUDA driver did not
// initialise: no driver, no device, or a driver too old.
const ExitUnavailable = 3
