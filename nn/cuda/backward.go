//go:build cuda || cudaemu

package cuda

import (
	"fmt"
)

// Scratch is the memory a backward pass works in, kept between passes.
type Scratch struct {
	gradA, gradB, gradTrunk, gradFeat Buffer
	gradConvA, gradConvB, dcol        Buffer
	part                              Buffer // the split weight gradients' partial sums
}

// Free releases s's memory.
func (s *Scratch) Free() {
	for _, b := range []*Buffer{&s.gradA, &s.gradB, &s.gradTrunk, &s.gradFeat, &s.gradConvA, &s.gradConvB, &s.dcol, &s.part} {
		b.Free()
	}
}

// Backward adds to grad (the device's [NumParams] gradient) the gradient
// of a loss whose gradient with respect to the outputs of the forward pass
// kept in a is dPi ([batch, ActionDim]) and dV ([batch]), either 0 for
// none: nn.ActorCritic.Backward, layer by layer. It modifies dPi and dV.
func (n *Net) Backward(a *Activations, s *Scratch, batch int, dPi, dV DevicePtr, grad DevicePtr) error {
	if batch != a.batch {
		return fmt.Errorf("cuda: backward of %d rows on a forward pass of %d", batch, a.batch)
	}
	if err := s.gradA.Reserve(4 * batch * n.maxWidth); err != nil {
		return err
	}
	if err := s.gradB.Reserve(4 * batch * n.maxWidth); err != nil {
		return err
	}
	feat := a.in
	var dFeat DevicePtr
	if k := len(n.conv); k > 0 {
		feat = a.conv[k-1].Ptr
		if err := s.gradFeat.Reserve(4 * batch * n.features); err != nil {
			return err
		}
		dFeat = s.gradFeat.Ptr
	}
	x, dx := feat, dFeat
	if k := len(n.trunk); k > 0 {
		x = a.trunk[k-1].Ptr
		if err := s.gradTrunk.Reserve(4 * batch * n.trunk[k-1].out); err != nil {
			return err
		}
		dx = s.gradTrunk.Ptr
	}
	beta := 0
	for _, h := range []struct {
		ls []dense
		ys []Buffer
		dy DevicePtr
	}{{n.pi, a.pi, dPi}, {n.v, a.v, dV}} {
		if h.dy == 0 {
			continue
		}
		if err := n.backwardChain(s, h.ls, x, h.ys, h.dy, batch, grad, dx, beta); err != nil {
			return err
		}
		beta = 1
	}
	if beta == 0 {
		return nil
	}
	if len(n.trunk) > 0 {
		if err := n.backwardChain(s, n.trunk, feat, a.trunk, s.gradTrunk.Ptr, batch, grad, dFeat, 0); err != nil {
			return err
		}
	}
	if dFeat != 0 {
		return n.backwardConv(a, s, dFeat, batch, grad)
	}
	return nil
}

// backwardChain is nn's: dy (modified) is the gradient of the chain's
// output; the input gradient goes to dx (+ dx where beta is 1) unless dx
// is 0.
func (n *Net) backwardChain(s *Scratch, ls []dense, x DevicePtr, ys []Buffer, dy DevicePtr, batch int,
	grad, dx DevicePtr, beta int) error {
	bufs := [2]DevicePtr{s.gradA.Ptr, s.gradB.Ptr}
	next := 0
	for i := len(ls) - 1; i >= 0; i-- {
		l := ls[i]
		if l.act != actNone {
			if err := n.c.Launch("act_grad", blocks(batch*l.out, 256), [3]int{256, 1, 1}, ys[i].Ptr, dy, batch*l.out, l.act); err != nil {
				return err
			}
		}
		in := x
		if i > 0 {
			in = ys[i-1].Ptr
		}
		if err := n.wgrad(s, "dense_wgrad", []any{in, dy}, nil, batch, l.in, l.out, grad+DevicePtr(4*l.w), grad+DevicePtr(4*l.b)); err != nil {
			return err
		}
		w := n.params.Ptr + DevicePtr(4*l.w)
		switch {
		case i > 0:
			d := bufs[next]
			next ^= 1
			if err := n.dgrad(dy, w, d, batch, l.in, l.out, 0); err != nil {
				return err
			}
			dy = d
		case dx != 0:
			if err := n.dgrad(dy, w, dx, batch, l.in, l.out, beta); err != nil {
				return err
			}
		}
	}
	return nil
}

// backwardConv is nn's: dy (modified) is the gradient of the last
// convolution's output; the observations' gradient is not computed.
func (n *Net) backwardConv(a *Activations, s *Scratch, dy DevicePtr, batch int, grad DevicePtr) error {
	bufs := [2]*Buffer{&s.gradConvA, &s.gradConvB}
	next := 0
	for i := len(n.conv) - 1; i >= 0; i-- {
		c := n.conv[i]
		if err := n.c.Launch("act_grad", blocks(batch*c.outSize(), 256), [3]int{256, 1, 1}, a.conv[i].Ptr, dy, batch*c.outSize(), n.act()); err != nil {
			return err
		}
		x := a.in
		if i > 0 {
			x = a.conv[i-1].Ptr
		}
		rows := batch * c.pixels()
		if err := n.wgrad(s, "conv_wgrad", []any{x, dy}, c.geom(), batch, c.cols(), c.outC,
			grad+DevicePtr(4*c.w), grad+DevicePtr(4*c.b)); err != nil {
			return err
		}
		if i == 0 {
			break
		}
		if err := s.dcol.Reserve(4 * rows * c.cols()); err != nil {
			return err
		}
		if err := n.dgrad(dy, n.params.Ptr+DevicePtr(4*c.w), s.dcol.Ptr, rows, c.cols(), c.outC, 0); err != nil {
			return err
		}
		dx := bufs[next]
		next ^= 1
		if err := dx.Reserve(4 * batch * c.inSize()); err != nil {
			return err
		}
		args := append([]any{s.dcol.Ptr, dx.Ptr, batch}, c.geom()...)
		if err := n.c.Launch("col2im", blocks(batch*c.inSize(), 256), [3]int{256, 1, 1}, args...); err != nil {
			return err
		}
		dy = dx.Ptr
	}
	return nil
}

// dgrad is dx = dy·Wᵀ (+ dx where beta is 1) for dy [rows, out] and W
// [in, out].
func (n *Net) dgrad(dy, w, dx DevicePtr, rows, in, out, beta int) error {
	return n.c.Launch("dense_dgrad", tiles(rows, in, 1), [3]int{16, 16, 1}, dy, w, dx, rows, in, out, beta)
}

// wgrad adds the gradient of a layer's weights gw ([in, out]) and bias gb
// ([out]) for batch rows (images for a convolution, whose sums run over
// their pixels too): kernel (dense_wgrad or conv_wgrad) sums the product
// in slices of the rows, as many as fill the GPU twice over with the
// output's few tiles, and wgrad_reduce adds the slices in order.
func (n *Net) wgrad(s *Scratch, kernel string, operands, geom []any, batch, in, out int, gw, gb DevicePtr) error {
	k := batch
	if geom != nil {
		k = batch * n.convPixels(geom)
	}
	outTiles := ((in + gemmTile) / gemmTile) * ((out + gemmTile - 1) / gemmTile) // in+1 rows: the bias's
	splits, chunk := n.c.splitK(outTiles, k, 256)
	size := (in + 1) * out
	if err := s.part.Reserve(4 * splits * size); err != nil {
		return err
	}
	args := append(append([]any{}, operands...), s.part.Ptr, batch)
	if geom != nil {
		args = append(args, geom...)
		args = append(args, out, chunk)
	} else {
		args = append(args, in, out, chunk)
	}
	if err := n.c.Launch(kernel, tiles(in+1, out, splits), [3]int{16, 16, 1}, args...); err != nil {
		return err
	}
	return n.c.Launch("wgrad_reduce", blocks(size, 256), [3]int{256, 1, 1}, s.part.Ptr, splits, in, out, gw, gb)
}

// convPixels is outH·outW of a convolution's geom arguments.
func (n *Net) convPixels(geom []any) int { return geom[3].(int) * geom[4].(int) }
