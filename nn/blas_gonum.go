//go:build noopenblas

package nn

// nativeKernels of a noopenblas build are gonum's.
var nativeKernels = goKernels

// useOpenBLASCore: there is no OpenBLAS to switch.
func useOpenBLASCore(string) (restore func(), ok bool) { return func() {}, false }

// tanhPaths: a noopenblas build has no tanh.c, only tanhGo.
var tanhPaths []int

func tanhRuns(int) bool { return false }

func tanhOn(y []float32, _ int) { tanhGo(y) }
