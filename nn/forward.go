package nn

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
)

// Output holds the result of a forward pass, or, passed to Backward, the
// gradient of a loss with respect to that result.
//
// Forward writes into the slices' existing storage when it is large enough,
// so reusing one Output across calls avoids allocation; the caller owns the
// slices and may keep or modify them freely.
type Output struct {
	// Logits holds [batch*ActionDim] unnormalised log-probabilities, row by
	// row, for a categorical head; it is empty for a Gaussian head.
	Logits []float32
	// Mean holds [batch*ActionDim] Gaussian means for a Gaussian head; it
	// is empty for a categorical head.
	Mean []float32
	// LogStd holds the [ActionDim] log standard deviations of a Gaussian
	// head, the same for every row because they do not depend on the
	// observation. As a gradient it may also be [batch*ActionDim]; Backward
	// then sums the rows.
	LogStd []float32
	// Values holds [batch] state-value estimates.
	Values []float32
}

// Workspace holds the activations of a forward pass, which Backward needs,
// and scratch memory, so that steady-state Forward and Backward calls do
// not allocate. (The exception is gonum itself, in a noopenblas build, in
// Backward: it runs a GEMM with more than a few 64×64 blocks, such as a
// 512-row batch through a 64-wide layer, on several goroutines, which costs
// a few small allocations per call. Forward keeps layers up to 192 wide on
// the calling goroutine, see serialRows, and allocates nothing.)
//
// The zero value is ready to use; a Workspace must not be used by two
// goroutines at once. It may be shared by networks of different
// shapes, growing as needed, but Backward only accepts a Workspace whose
// last Forward was on the same network and batch size.
type Workspace struct {
	model *ActorCritic // network of the last successful Forward
	batch int          // batch size of the last successful Forward

	obs          []float32   // copy of the last input, the first layer's x
	trunk, pi, v [][]float32 // post-activation output of each hidden layer
	gradA, gradB []float32   // ping-pong buffers for gradients inside a chain
	gradTrunk    []float32   // gradient flowing from the heads into a shared trunk

	conv                 [][]float32 // post-activation output of each convolution
	col, dcol            []float32   // one chunk's im2col matrix, and its gradient
	gradFeat             []float32   // gradient flowing from the dense layers into the convolutions
	gradConvA, gradConvB []float32   // ping-pong buffers for gradients between convolutions
}

// NewWorkspace returns an empty Workspace. It is equivalent to
// new(Workspace) and exists for symmetry with the rest of the API.
func NewWorkspace() *Workspace { return new(Workspace) }

// ErrShape is wrapped by the errors Forward and Backward return when a
// buffer does not have the length the network and batch size call for.
var ErrShape = errors.New("nn: shape mismatch")

// Forward evaluates the network on batch observations stored row by row in
// obs ([batch*ObsDim]; with Spec.InputShape each row is an [H, W, C]
// image, channels last) and writes the policy head's output, the log-stds
// and the values into out (see Output). The activations are kept in ws for
// a following Backward; obs is copied, so the caller may reuse it at once.
func (m *ActorCritic) Forward(obs []float32, batch int, ws *Workspace, out *Output) error {
	if ws == nil || out == nil {
		return errors.New("nn: forward: nil workspace or output")
	}
	if batch <= 0 {
		return fmt.Errorf("nn: forward: batch must be positive, got %d", batch)
	}
	// Divide rather than multiply so that an absurd batch cannot overflow.
	if d := m.spec.ObsDim; len(obs)%d != 0 || len(obs)/d != batch {
		return fmt.Errorf("nn: forward: %w: obs has %d values, want batch %d × ObsDim %d",
			ErrShape, len(obs), batch, d)
	}
	ws.model = nil // invalid until this pass completes
	ws.obs = grow(ws.obs, len(obs))
	copy(ws.obs, obs)
	ws.trunk = growActs(ws.trunk, m.trunk, batch)
	ws.pi = growActs(ws.pi, m.pi, batch)
	ws.v = growActs(ws.v, m.v, batch)

	a := m.spec.ActionDim
	head := &out.Logits
	if m.spec.Head == Gaussian {
		head = &out.Mean
		out.Logits = out.Logits[:0]
		out.LogStd = grow(out.LogStd, a)
		copy(out.LogStd, m.params[m.logStd:m.logStd+a])
	} else {
		out.Mean = out.Mean[:0]
		out.LogStd = out.LogStd[:0]
	}
	*head = grow(*head, batch*a)
	out.Values = grow(out.Values, batch)

	x := ws.obs
	if len(m.conv) > 0 {
		m.growConv(ws, batch)
		x = m.forwardConv(ws, x, batch)
	}
	x = m.forwardChain(m.trunk, x, batch, ws.trunk, nil)
	m.forwardChain(m.pi, x, batch, ws.pi, *head)
	m.spec.MaskLogits(obs, *head, batch)
	m.forwardChain(m.v, x, batch, ws.v, out.Values)

	ws.model, ws.batch = m, batch
	return nil
}

// forwardChain runs the layers ls on x ([batch, ls[0].in]). Hidden layers
// write into acts; a head writes into head. It returns the chain's output,
// or x itself for an empty chain.
func (m *ActorCritic) forwardChain(ls []layer, x []float32, batch int, acts [][]float32, head []float32) []float32 {
	for i, l := range ls {
		y := head
		if l.act {
			y = acts[i]
		}
		w, b := m.params[l.w:l.w+l.in*l.out], m.params[l.b:l.b+l.out]
		var act Activation
		if l.act {
			act = m.spec.Activation
		}
		denseLayer(x, w, b, y, batch, l.in, l.out, act)
		x = y
	}
	return x
}

// denseLayer sets y ([batch, out]) to act(x·W + b): in one call of
// dense.c where the kernels have it and it is faster (denseFaster), else
// by a GEMM.
func denseLayer(x, w, b, y []float32, batch, in, out int, act Activation) {
	if active.dense == nil || !active.dense(x, w, b, y, batch, in, out, act) {
		denseGEMM(x, w, b, y, batch, in, out, act)
	}
}

// denseGEMM sets y ([batch, out]) to act(x·W + b) by a GEMM: it starts
// from the bias in every row and lets the GEMM accumulate onto it (beta =
// 1), which saves a separate pass to add it afterwards.
func denseGEMM(x, w, b, y []float32, batch, in, out int, act Activation) {
	fillRows(y[:batch*out], b)
	matMul(x, w, y, batch, in, out)
	activate(act, y[:batch*out])
}

// fillRows sets every row of y (len(y) a multiple of len(row)) to row: one
// row, doubled up to a block of about 4 KiB, then that block copied
// across, its source staying in the L1 cache. A copy per row was a small
// memmove per row: 2048 of them for a CartPole batch of 512, 51200 for a
// MinAtar conv layer's pixels.
func fillRows(y, row []float32) {
	if len(row) == 0 {
		return
	}
	n := copy(y, row)
	for n < len(y) && n < fillBlock {
		n += copy(y[n:], y[:n])
	}
	for i := n; i < len(y); i += n {
		copy(y[i:], y[:n])
	}
}

// fillBlock is the block, in values, fillRows copies across.
const fillBlock = 1024

// narrow is the output width up to which a layer is computed column by
// column with matrix-vector products instead of one GEMM. gonum's Sgemm
// runs one AXPY of the output width per element of x, which for a 1- or
// 2-wide head costs as many calls as a 64-wide hidden layer for almost no
// arithmetic; Sgemv instead runs one dot product per row and column.
const narrow = 4

// gemmBlock and gemmParBlocks are gonum's: Sgemm splits C into blocks of
// gemmBlock×gemmBlock and runs a product of gemmParBlocks or more blocks
// on several goroutines.
const (
	gemmBlock     = 64
	gemmParBlocks = 4
)

// serialRows is how many rows of a product of width out matMul hands to
// one Sgemm call so that gonum runs it on the calling goroutine (0: none
// is small enough). Fanning a forward pass out over goroutines costs
// futex wake-ups per call, which a policy worker sharing the machine's
// cores with its actors paid for and did not get back: with 2 actors of
// 256 environments on 2 cores, the hand-offs were about a tenth of its CPU
// time. Each element of y is computed by the same operations in the same
// order either way.
func serialRows(out int) int {
	return (gemmParBlocks - 1) / ((out + gemmBlock - 1) / gemmBlock) * gemmBlock
}

// matMul adds x·W to y, for x [batch, in], W [in, out] and y [batch, out],
// on the calling goroutine when the width allows (see serialRows; OpenBLAS
// runs on one thread unless told otherwise, and takes the batch whole).
func matMul(x, w, y []float32, batch, in, out int) {
	if out > narrow {
		rows := batch
		if active.fansOut {
			if rows = serialRows(out); rows == 0 {
				rows = batch
			}
		}
		for r := 0; r < batch; r += rows {
			n := min(rows, batch-r)
			active.blas.Sgemm(blas.NoTrans, blas.NoTrans, n, out, in, 1, x[r*in:], in, w, out, 1, y[r*out:], out)
		}
		return
	}
	for j := range out {
		// Column j of y += x · column j of W, both strided by out.
		active.blas.Sgemv(blas.NoTrans, batch, in, 1, x, in, w[j:], out, 1, y[j:], out)
	}
}

func activate(act Activation, y []float32) {
	switch act {
	case Tanh:
		active.tanh(y)
	case ReLU:
		active.relu(y)
	}
}

// activateGrad multiplies dy in place by the activation's derivative,
// expressed through the activation's output y (both tanh and ReLU allow it,
// which is why Forward keeps only post-activation values).
func activateGrad(act Activation, y, dy []float32) {
	switch act {
	case Tanh:
		active.tanhGrad(y, dy)
	case ReLU:
		active.reluGrad(y, dy)
	}
}

// reluGo sets y to max(y, 0): NaN stays NaN, -0 becomes +0.
func reluGo(y []float32) {
	for i, v := range y {
		y[i] = max(v, 0)
	}
}

// tanhGradGo multiplies dy by tanh's derivative, 1 - y², y its output.
func tanhGradGo(y, dy []float32) {
	dy = dy[:len(y)]
	for i, v := range y {
		dy[i] *= 1 - v*v
	}
}

// reluGradGo keeps dy where ReLU's output y is on and zeroes it elsewhere.
// Branch-free: y is max(x, 0), never negative (or -0), so its bits are zero
// exactly where the unit is off, and the mask built from them keeps dy
// where it is on (NaN included, as v <= 0 would). A branch on the sign of a
// random pre-activation is mispredicted half the time; it took a sixth of
// a conv network's training step.
func reluGradGo(y, dy []float32) {
	dy = dy[:len(y)]
	for i, v := range y {
		on := uint32(int32(-math.Float32bits(v)) >> 31)
		dy[i] = math.Float32frombits(math.Float32bits(dy[i]) & on)
	}
}

// grow returns s resliced to n elements, reallocating only if its capacity
// is too small. The contents are unspecified.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// growActs sizes one buffer per hidden layer of ls for batch rows. Heads
// get no buffer because they write to the caller's Output.
func growActs(acts [][]float32, ls []layer, batch int) [][]float32 {
	if cap(acts) < len(ls) {
		acts = append(acts[:cap(acts)], make([][]float32, len(ls)-cap(acts))...)
	}
	acts = acts[:len(ls)]
	for i, l := range ls {
		if l.act {
			acts[i] = grow(acts[i], batch*l.out)
		}
	}
	return acts
}

// tanh32 is a float32 tanh accurate to about 4e-7 (a few ulps), bounded by
// 1 in magnitude, and several times faster than math.Tanh, which computes
// in float64 and dominated the forward pass of small networks. It is the
// odd/even rational approximation on [-7.9, 7.9] that Eigen uses for
// float32 tanh (beyond that range tanh rounds to ±1 in float32). Near 0
// it returns x·(1 - 1.3e-7), within an ulp of tanh(x).
func tanh32(x float32) float32 {
	const clamp = 7.90531110763549805
	// Plain comparisons rather than the min and max builtins, whose NaN
	// handling made this function a third slower; NaN still passes through.
	if x > clamp {
		x = clamp
	} else if x < -clamp {
		x = -clamp
	}
	x2 := x * x
	p := float32(-2.76076847742355e-16)
	p = p*x2 + 2.00018790482477e-13
	p = p*x2 - 8.60467152213735e-11
	p = p*x2 + 5.12229709037114e-08
	p = p*x2 + 1.48572235717979e-05
	p = p*x2 + 6.37261928875436e-04
	p = p*x2 + 4.89352455891786e-03
	q := float32(1.19825839466702e-06)
	q = q*x2 + 1.18534705686654e-04
	q = q*x2 + 2.26843463243900e-03
	q = q*x2 + 4.89352518554385e-03
	return x * p / q
}
