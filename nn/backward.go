package nn

import (
	"errors"
	"fmt"

	"gonum.org/v1/gonum/blas"
)

// Backward adds to grad (NumParams long) the gradient, with respect to the
// parameters, of a loss whose gradient with respect to the outputs of the
// preceding Forward on ws is dOut. It accumulates rather than overwrites so
// that several losses, or several minibatches, can be summed without extra
// buffers; zero grad first to get a plain gradient.
//
// dOut uses the layout of Forward's Output: Logits (categorical) or Mean
// (Gaussian) [batch*ActionDim], LogStd [ActionDim] or [batch*ActionDim]
// (Gaussian only), Values [batch]. An empty slice stands for a zero
// gradient and skips the work it would cost, so a value-only loss does not
// pay for the policy network. dOut is not modified.
//
// ws must hold the activations of a Forward of m at this batch size, and m's
// parameters must not have changed since, or the gradient is that of a
// network that no longer exists. Backward leaves the activations intact, so
// it may be called several times after one Forward.
func (m *ActorCritic) Backward(ws *Workspace, batch int, dOut *Output, grad []float32) error {
	if ws == nil || dOut == nil {
		return errors.New("nn: backward: nil workspace or output gradient")
	}
	if ws.model != m {
		return errors.New("nn: backward: workspace does not hold a forward pass of this network")
	}
	if ws.batch != batch {
		return fmt.Errorf("nn: backward: %w: batch %d, but the forward pass had batch %d", ErrShape, batch, ws.batch)
	}
	if len(grad) != len(m.params) {
		return fmt.Errorf("nn: backward: %w: grad has %d values, network has %d parameters", ErrShape, len(grad), len(m.params))
	}
	a := m.spec.ActionDim
	dPi, other := dOut.Logits, dOut.Mean
	piName, otherName := "Logits", "Mean"
	if m.spec.Head == Gaussian {
		dPi, other = other, dPi
		piName, otherName = otherName, piName
	}
	if len(other) != 0 {
		return fmt.Errorf("nn: backward: %w: %s gradient given for a %s head", ErrShape, otherName, m.spec.Head)
	}
	if len(dPi) != 0 && len(dPi) != batch*a {
		return fmt.Errorf("nn: backward: %w: %s gradient has %d values, want 0 or %d", ErrShape, piName, len(dPi), batch*a)
	}
	if len(dOut.Values) != 0 && len(dOut.Values) != batch {
		return fmt.Errorf("nn: backward: %w: Values gradient has %d values, want 0 or %d", ErrShape, len(dOut.Values), batch)
	}
	dLogStd := dOut.LogStd
	if m.spec.Head != Gaussian && len(dLogStd) != 0 {
		return fmt.Errorf("nn: backward: %w: LogStd gradient given for a %s head", ErrShape, m.spec.Head)
	}
	if n := len(dLogStd); n != 0 && n != a && n != batch*a {
		return fmt.Errorf("nn: backward: %w: LogStd gradient has %d values, want 0, %d or %d", ErrShape, n, a, batch*a)
	}

	n := batch * m.maxWidth
	ws.gradA, ws.gradB = grow(ws.gradA, n), grow(ws.gradB, n)

	// The dense layers read the features: the last convolution's output,
	// or the observations when there is none, whose gradient nobody needs.
	feat := ws.obs
	var dFeat []float32
	if k := len(m.conv); k > 0 {
		feat = ws.conv[k-1]
		ws.gradFeat = grow(ws.gradFeat, batch*m.features)
		dFeat = ws.gradFeat
	}
	// Heads read the trunk's output, or the features when there is no
	// shared trunk. Both heads send their input gradient into the same
	// buffer (gradTrunk, or gradFeat): the first overwrites it, the second
	// adds.
	x, dx := feat, dFeat
	if k := len(m.trunk); k > 0 {
		x = ws.trunk[k-1]
		ws.gradTrunk = grow(ws.gradTrunk, batch*m.trunk[k-1].out)
		dx = ws.gradTrunk
	}
	var beta float32
	if len(dPi) != 0 {
		m.backwardChain(ws, m.pi, x, ws.pi, dPi, batch, grad, dx, beta)
		beta = 1
	}
	if len(dOut.Values) != 0 {
		m.backwardChain(ws, m.v, x, ws.v, dOut.Values, batch, grad, dx, beta)
		beta = 1
	}
	if beta != 0 { // some gradient flowed into the shared layers
		if len(m.trunk) > 0 {
			m.backwardChain(ws, m.trunk, feat, ws.trunk, ws.gradTrunk, batch, grad, dFeat, 0)
		}
		if dFeat != nil {
			m.backwardConv(ws, dFeat, batch, grad)
		}
	}

	if len(dLogStd) != 0 {
		g := grad[m.logStd : m.logStd+a]
		for r := 0; r < len(dLogStd); r += a {
			for j, d := range dLogStd[r : r+a] {
				g[j] += d
			}
		}
	}
	return nil
}

// backwardChain backpropagates dy, the gradient with respect to the output
// of the chain ls, whose input was x and whose hidden outputs are acts. It
// adds the parameter gradients to grad and, if dx is non-nil, stores
// dx = input gradient + beta*dx. dy is modified in place only if it belongs
// to ws, which is the case exactly when the chain's last layer is a hidden
// layer (the trunk); a head never modifies the caller's dOut.
func (m *ActorCritic) backwardChain(ws *Workspace, ls []layer, x []float32, acts [][]float32, dy []float32,
	batch int, grad, dx []float32, beta float32) {
	bufs := [2][]float32{ws.gradA, ws.gradB}
	next := 0
	for i := len(ls) - 1; i >= 0; i-- {
		l := ls[i]
		if l.act {
			activateGrad(m.spec.Activation, acts[i], dy)
		}
		in := x
		if i > 0 {
			in = acts[i-1]
		}
		w := m.params[l.w : l.w+l.in*l.out]
		matMulTransA(in, dy, grad[l.w:l.w+l.in*l.out], batch, l.in, l.out)
		sumRows(dy, grad[l.b:l.b+l.out], batch, l.out)
		// dIn = dy·Wᵀ, skipped at the bottom of a chain nobody needs it from.
		switch {
		case i > 0:
			d := bufs[next][:batch*l.in]
			next ^= 1
			matMulTransB(dy, w, d, 0, batch, l.in, l.out)
			dy = d
		case dx != nil:
			matMulTransB(dy, w, dx, beta, batch, l.in, l.out)
		}
	}
}

// sumRows adds the rows rows of dy ([rows, out]) to gb ([out]): a bias's
// gradient, summed over the batch (and a convolution's over its pixels).
func sumRows(dy, gb []float32, rows, out int) { active.sumRows(dy, gb, rows, out) }

// sumRowsGo is sumRows in Go, the rows in order.
func sumRowsGo(dy, gb []float32, rows, out int) {
	for r := range rows {
		for j, d := range dy[r*out : (r+1)*out] {
			gb[j] += d
		}
	}
}

// matMulTransA adds xᵀ·dy to dW, for x [batch, in], dy [batch, out] and
// dW [in, out]: the weight gradient, summed over the batch by the product.
// Narrow layers go column by column for the reason given at narrow.
func matMulTransA(x, dy, dW []float32, batch, in, out int) {
	if out > narrow {
		active.blas.Sgemm(blas.Trans, blas.NoTrans, in, out, batch, 1, x, in, dy, out, 1, dW, out)
		return
	}
	for j := range out {
		active.blas.Sgemv(blas.Trans, batch, in, 1, x, in, dy[j:], out, 1, dW[j:], out)
	}
}

// matMulTransB stores dy·Wᵀ + beta·dx in dx, for dy [batch, out],
// W [in, out] and dx [batch, in]: the gradient with respect to the layer's
// input. Narrow layers are a sum of out rank-one updates.
func matMulTransB(dy, w, dx []float32, beta float32, batch, in, out int) {
	if out > narrow {
		active.blas.Sgemm(blas.NoTrans, blas.Trans, batch, in, out, 1, dy, out, w, out, beta, dx, in)
		return
	}
	switch beta {
	case 0:
		clear(dx[:batch*in])
	case 1:
	default:
		active.blas.Sscal(batch*in, beta, dx, 1)
	}
	for j := range out {
		active.blas.Sger(batch, in, 1, dy[j:], out, w[j:], out, dx, in)
	}
}
