//go:build noopenblas

package nn

import "gonum.org/v1/gonum/blas/gonum"

// impl is gonum's pure-Go BLAS, called directly rather than through
// blas32's package-level implementation so that another package calling
// blas32.Use cannot change the numerics of this one.
var impl float32BLAS = gonum.Implementation{}

// fansOut: gonum runs a large Sgemm on several goroutines: matMul hands it row slices
// that stay on the calling one (serialRows).
const fansOut = true

const blasName = "gonum"

// tanhSlice sets each element of y to its tanh32.
func tanhSlice(y []float32) {
	for i, v := range y {
		y[i] = tanh32(v)
	}
}
