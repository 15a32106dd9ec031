//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"github.com/distrl/distrl/nn"
)

// Activation codes of kernels.cu.
const (
	actNone = 0
	actTanh = 1
	actReLU = 2
)

// narrowMax is kernels.cu's NARROW: the widest layer dense_narrow computes.
const narrowMax = 8

// gemmTile is the side of kernels.cu's output tiles (BM, BN).
const gemmTile = 64

// dense is one dense layer of the network on the device.
type dense struct {
	in, out int
	w, b    int // offsets of W and b in the parameter vector
	act     int // activation code
}

// conv is one convolution, with nn's shapes and layout.
type conv struct {
	inH, inW, inC, outH, outW, outC, k, stride, pad int
	w, b                                            int
}

func (c conv) cols() int    { return c.k * c.k * c.inC }
func (c conv) pixels() int  { return c.outH * c.outW }
func (c conv) inSize() int  { return c.inH * c.inW * c.inC }
func (c conv) outSize() int { return c.pixels() * c.outC }
func (c conv) geom() []any {
	return []any{c.inH, c.inW, c.inC, c.outH, c.outW, c.k, c.stride, c.pad}
}

// Net is an nn.ActorCritic laid out on a Context: the same flat parameter
// vector, the same layers, run by kernels.cu. Its methods need the context
// current.
type Net struct {
	c        *Context
	spec     nn.Spec
	conv     []conv
	features int
	trunk    []dense
	pi, v    []dense
	maxWidth int
	params   Buffer
	nparams  int
}

// NewNet lays net out on c and uploads its parameters; the context is
// current.
func NewNet(c *Context, net *nn.ActorCritic) (*Net, error) {
	s := net.Spec()
	if s.ActionMask != nil {
		// The categorical kernels sample and score every action.
		return nil, fmt.Errorf("cuda: %w: action masks (a board game's legal moves) run on the CPU only", nn.ErrInvalidSpec)
	}
	arch := net.Architecture()
	n := &Net{c: c, spec: s, features: arch.Features, nparams: net.NumParams()}
	act := actTanh
	if s.Activation == nn.ReLU {
		act = actReLU
	}
	for _, l := range arch.Conv {
		n.conv = append(n.conv, conv{inH: l.InH, inW: l.InW, inC: l.InC, outH: l.OutH, outW: l.OutW, outC: l.OutC,
			k: l.Kernel, stride: l.Stride, pad: l.Padding, w: l.W, b: l.B})
	}
	chain := func(ls []nn.DenseLayer) []dense {
		var out []dense
		for _, l := range ls {
			d := dense{in: l.In, out: l.Out, w: l.W, b: l.B, act: actNone}
			if l.Activated {
				d.act = act
			}
			n.maxWidth = max(n.maxWidth, l.In, l.Out)
			out = append(out, d)
		}
		return out
	}
	n.trunk, n.pi, n.v = chain(arch.Trunk), chain(arch.Pi), chain(arch.V)
	if err := n.params.Reserve(4 * n.nparams); err != nil {
		return nil, err
	}
	if err := n.SetParams(net.Params()); err != nil {
		n.params.Free()
		return nil, err
	}
	return n, nil
}

// Spec is the network's spec.
func (n *Net) Spec() nn.Spec { return n.spec }

// NumParams is the length of the parameter vector.
func (n *Net) NumParams() int { return n.nparams }

// ParamsPtr is the parameter vector on the device.
func (n *Net) ParamsPtr() DevicePtr { return n.params.Ptr }

// SetParams uploads params whole.
func (n *Net) SetParams(params []float32) error {
	if len(params) != n.nparams {
		return fmt.Errorf("cuda: set params: got %d values, the network has %d", len(params), n.nparams)
	}
	return upload(n.params.Ptr, params)
}

// Free releases the parameters' memory.
func (n *Net) Free() { n.params.Free() }

// Activations are the outputs of every layer of a forward pass on the
// device, which a backward pass reads, for up to Rows rows.
type Activations struct {
	rows  int
	batch int       // the last Forward's rows; 0 before one
	Obs   Buffer    // room for the input, [rows, ObsDim]
	in    DevicePtr // the last Forward's input

	conv         []Buffer // each convolution's output
	trunk, pi, v []Buffer // each dense layer's output; the heads' are the last of pi and v
	part         Buffer   // the partial sums of a split dense layer
}

// Reserve sizes a for rows rows of n.
func (a *Activations) Reserve(n *Net, rows int) error {
	if rows <= a.rows {
		return nil
	}
	rows = max(rows, 2*a.rows, 64)
	if int64(rows)*int64(max(n.spec.ObsDim, n.maxWidth, n.features)) > 1<<31-1 {
		return fmt.Errorf("cuda: %d rows of this network exceed the kernels' 32-bit indices", rows)
	}
	if err := a.Obs.Reserve(4 * rows * n.spec.ObsDim); err != nil {
		return err
	}
	grow := func(bufs []Buffer, sizes []int) ([]Buffer, error) {
		for len(bufs) < len(sizes) {
			bufs = append(bufs, Buffer{})
		}
		for i, s := range sizes {
			if err := bufs[i].Reserve(4 * rows * s); err != nil {
				return bufs, err
			}
		}
		return bufs, nil
	}
	widths := func(ls []dense) []int {
		var w []int
		for _, l := range ls {
			w = append(w, l.out)
		}
		return w
	}
	var convSizes []int
	for _, c := range n.conv {
		convSizes = append(convSizes, c.outSize())
	}
	var err error
	if a.conv, err = grow(a.conv, convSizes); err != nil {
		return err
	}
	if a.trunk, err = grow(a.trunk, widths(n.trunk)); err != nil {
		return err
	}
	if a.pi, err = grow(a.pi, widths(n.pi)); err != nil {
		return err
	}
	if a.v, err = grow(a.v, widths(n.v)); err != nil {
		return err
	}
	a.rows = rows
	return nil
}

// Free releases a's memory.
func (a *Activations) Free() {
	a.Obs.Free()
	a.part.Free()
	for _, bs := range [][]Buffer{a.conv, a.trunk, a.pi, a.v} {
		for i := range bs {
			bs[i].Free()
		}
	}
	a.rows = 0
}

// Forward runs the network on batch rows of x (a.Obs, or any [batch,
// ObsDim] on the device that stays there until a Backward), keeping every
// layer's output in a, and returns where the policy head's output (logits or
// Gaussian means, [batch, ActionDim]) and the values ([batch]) are. The
// launches are queued on the null stream; nothing waits for them.
func (n *Net) Forward(a *Activations, x DevicePtr, batch int) (pi, v DevicePtr, err error) {
	if batch > a.rows {
		return 0, 0, fmt.Errorf("cuda: forward of %d rows on activations for %d", batch, a.rows)
	}
	a.in, a.batch = x, batch
	for i, c := range n.conv {
		y := a.conv[i].Ptr
		args := append([]any{x, n.params.Ptr + DevicePtr(4*c.w), n.params.Ptr + DevicePtr(4*c.b), y, batch}, c.geom()...)
		args = append(args, c.outC, n.act())
		if err := n.c.Launch("conv_forward", tiles(batch*c.pixels(), c.outC, 1), [3]int{16, 16, 1}, args...); err != nil {
			return 0, 0, err
		}
		x = y
	}
	if x, err = n.forwardChain(n.trunk, a.trunk, &a.part, x, batch); err != nil {
		return 0, 0, err
	}
	if pi, err = n.forwardChain(n.pi, a.pi, &a.part, x, batch); err != nil {
		return 0, 0, err
	}
	v, err = n.forwardChain(n.v, a.v, &a.part, x, batch)
	return pi, v, err
}

func (n *Net) act() int {
	if n.spec.Activation == nn.ReLU {
		return actReLU
	}
	return actTanh
}

// splitK says how to split a GEMM of tiles output tiles over its k sums
// (each slice at least minChunk long) so that its blocks fill the GPU
// twice over: splits 1 where the tiles alone do.
func (c *Context) splitK(tiles, k, minChunk int) (splits, chunk int) {
	splits = max(1, min((2*c.sms+tiles-1)/tiles, k/minChunk))
	chunk = ((k+splits-1)/splits + 15) / 16 * 16
	return (k + chunk - 1) / chunk, chunk
}

// tiles is the grid of kernels.cu's GEMM for an [m, cols] output, split
// z ways over k.
func tiles(m, cols, z int) [3]int {
	return [3]int{(cols + gemmTile - 1) / gemmTile, (m + gemmTile - 1) / gemmTile, z}
}

func (n *Net) forwardChain(ls []dense, ys []Buffer, part *Buffer, x DevicePtr, batch int) (DevicePtr, error) {
	for i, l := range ls {
		y := ys[i].Ptr
		args := []any{x, n.params.Ptr + DevicePtr(4*l.w), n.params.Ptr + DevicePtr(4*l.b), y, batch, l.in, l.out, l.act}
		var err error
		outTiles := ((batch + gemmTile - 1) / gemmTile) * ((l.out + gemmTile - 1) / gemmTile)
		switch splits, chunk := n.c.splitK(outTiles, l.in, 128); {
		case l.out <= narrowMax:
			const warps = 8 // rows per block
			err = n.c.Launch("dense_narrow", blocks(batch, warps), [3]int{32 * warps, 1, 1}, args...)
		case splits == 1:
			err = n.c.Launch("dense", tiles(batch, l.out, 1), [3]int{16, 16, 1}, args...)
		default:
			if err = part.Reserve(4 * splits * batch * l.out); err == nil {
				err = n.c.Launch("dense_split", tiles(batch, l.out, splits), [3]int{16, 16, 1}, x, args[1], part.Ptr, batch, l.in, l.out, chunk)
			}
			if err == nil {
				err = n.c.Launch("reduce_bias_act", blocks(batch*l.out, 256), [3]int{256, 1, 1}, part.Ptr, splits, batch, l.out, args[2], y, l.act)
			}
		}
		if err != nil {
			return 0, fmt.Errorf("cuda: layer %d×%d: %w", l.in, l.out, err)
		}
		x = y
	}
	return x, nil
}
