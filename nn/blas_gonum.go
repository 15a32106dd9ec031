//go:build noopenblas

package nn

// nativeKernels of a noopenblas build are gonum's.
var nativeKernels = goKernels

// useOpenBLASCore: there is no OpenBLAS to switch.
func useOpenBLASCore(string) (restore func(), ok bool) { return func() {}, false }
