//go:build noopenblas

package nn

// nativeKernels of a noopenblas build are gonum's.
var nativeKernels = goKernels

// useOpenBLASCore: there is no OpenBLAS to switch.
func useOpenBLASCore(string) (restore func(), ok bool) { return func() {}, false }

// simdPaths: a noopenblas build has no C, only the Go loops.
var simdPaths []int

func simdRuns(int) bool { return false }

func tanhOn(y []float32, _ int) { tanhGo(y) }

func adamOn(params, m, v, grad []float32, s adamStep, _ int) { adamGo(params, m, v, grad, s) }

// elementwise of a noopenblas build runs the Go loops, whatever the lanes.
type elementwise struct{ lanes int }

func (elementwise) relu(y []float32)                                             { reluGo(y) }
func (elementwise) tanhGrad(y, dy []float32)                                     { tanhGradGo(y, dy) }
func (elementwise) reluGrad(y, dy []float32)                                     { reluGradGo(y, dy) }
func (elementwise) sumRows(dy, gb []float32, rows, out int)                      { sumRowsGo(dy, gb, rows, out) }
func (elementwise) dense(_, _, _, _ []float32, _, _, _ int, _ Activation) bool   { return false }
func (elementwise) denseOn(_, _, _, _ []float32, _, _, _ int, _ Activation) bool { return false }
func (elementwise) im2col(g convGeom, x []float32, n int, col []float32)         { im2colGo(g, x, n, col) }
func (elementwise) col2im(g convGeom, x []float32, n int, col []float32)         { col2imGo(g, x, n, col) }
