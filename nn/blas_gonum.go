//go:build noopenblas

package nn

// nativeKernels of a noopenblas build are gonum's.
var nativeKernels = goKernels
