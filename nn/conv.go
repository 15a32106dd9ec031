package nn

import "fmt"

// ConvLayer is one 2-D convolution of a Spec: Filters output channels,
// each a Kernel×Kernel window over every input channel, moved Stride
// pixels at a time over the input with Padding rows and columns of zeros
// added on each side. An input of H×W gives an output of
// ((H + 2·Padding - Kernel)/Stride + 1)×((W + 2·Padding - Kernel)/Stride + 1)
// (rounded down, as PyTorch's Conv2d: windows that would run past the
// padded input are dropped). Padding 0 is a "valid" convolution.
//
// The tags are those of a worker's configuration, e.g.
// conv: [{filters: 16, kernel: 3, stride: 1}].
type ConvLayer struct {
	Filters int `msgpack:"filters" json:"filters"`
	Kernel  int `msgpack:"kernel" json:"kernel"`
	// Stride must be at least 1: a zero is refused rather than read as 1,
	// so that two specs of one network cannot differ in how they say it.
	Stride  int `msgpack:"stride" json:"stride"`
	Padding int `msgpack:"padding,omitempty" json:"padding,omitempty"`
}

// convGeom is a convolution with the shapes of its input and output, one
// image each, channels last.
type convGeom struct {
	inH, inW, inC    int
	outH, outW, outC int
	k, stride, pad   int
}

// cols is the length of one patch: the rows of the weight matrix.
func (g convGeom) cols() int { return g.k * g.k * g.inC }

// inSize and outSize are the values of one image of input and output.
func (g convGeom) inSize() int  { return g.inH * g.inW * g.inC }
func (g convGeom) outSize() int { return g.outH * g.outW * g.outC }

// pixels is the number of output positions of one image: the rows of its
// im2col matrix.
func (g convGeom) pixels() int { return g.outH * g.outW }

// identity reports whether im2col would copy the input unchanged (a 1×1
// kernel at stride 1 without padding), so that it can be skipped.
func (g convGeom) identity() bool { return g.k == 1 && g.stride == 1 && g.pad == 0 }

// mulWithin returns the product of xs (each non-negative) and whether it
// is at most limit, checking before each multiplication so that nothing
// overflows.
func mulWithin(limit int, xs ...int) (int, bool) {
	p := 1
	for _, x := range xs {
		if x != 0 && p > limit/x {
			return 0, false
		}
		p *= x
	}
	return p, true
}

// convGeometry checks InputShape and Conv and returns the shapes of the
// convolutions in order (none without Conv). Every size is bounded by
// maxParams before it is used in a sum or product, so a corrupt spec
// cannot overflow an int.
func (s Spec) convGeometry() ([]convGeom, error) {
	if s.InputShape == nil {
		if len(s.Conv) > 0 {
			return nil, fmt.Errorf("%w: Conv needs InputShape [H, W, C]", ErrInvalidSpec)
		}
		return nil, nil
	}
	if len(s.InputShape) != 3 {
		return nil, fmt.Errorf("%w: InputShape must be [H, W, C], got %v", ErrInvalidSpec, s.InputShape)
	}
	for i, d := range s.InputShape {
		if d <= 0 {
			return nil, fmt.Errorf("%w: InputShape[%d] must be positive, got %d", ErrInvalidSpec, i, d)
		}
	}
	if n, ok := mulWithin(maxParams, s.InputShape...); !ok || n != s.ObsDim {
		return nil, fmt.Errorf("%w: InputShape %v does not have ObsDim %d values", ErrInvalidSpec, s.InputShape, s.ObsDim)
	}
	h, w, c := s.InputShape[0], s.InputShape[1], s.InputShape[2]
	geoms := make([]convGeom, 0, len(s.Conv))
	for i, l := range s.Conv {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: Conv[%d] (%+v): %s", ErrInvalidSpec, i, l, fmt.Sprintf(format, args...))
		}
		switch {
		case l.Filters <= 0 || l.Filters > maxParams:
			return nil, bad("Filters must be in [1, %d]", maxParams)
		case l.Kernel <= 0 || l.Kernel > maxParams:
			return nil, bad("Kernel must be in [1, %d]", maxParams)
		case l.Stride <= 0 || l.Stride > maxParams:
			return nil, bad("Stride must be in [1, %d]", maxParams)
		case l.Padding < 0 || l.Padding >= l.Kernel:
			// A window over padding alone would see nothing but zeros.
			return nil, bad("Padding must be in [0, Kernel-1]")
		case h+2*l.Padding < l.Kernel || w+2*l.Padding < l.Kernel:
			return nil, bad("the kernel is larger than the padded %d×%d input", h+2*l.Padding, w+2*l.Padding)
		}
		g := convGeom{inH: h, inW: w, inC: c, outC: l.Filters, k: l.Kernel, stride: l.Stride, pad: l.Padding,
			outH: (h+2*l.Padding-l.Kernel)/l.Stride + 1, outW: (w+2*l.Padding-l.Kernel)/l.Stride + 1}
		if _, ok := mulWithin(maxParams, g.k, g.k, g.inC); !ok {
			return nil, bad("a patch has more than %d values", maxParams)
		}
		if _, ok := mulWithin(maxParams, g.outH, g.outW, g.outC); !ok {
			return nil, bad("the output has more than %d values per observation", maxParams)
		}
		geoms = append(geoms, g)
		h, w, c = g.outH, g.outW, g.outC
	}
	return geoms, nil
}

// convLayer is a convolution of a network: its shapes and where its
// weights ([cols, outC], row-major) and biases ([outC]) live.
type convLayer struct {
	convGeom
	w, b int
}

// colFloats bounds the im2col buffer: a batch is lowered a chunk of
// images at a time, so that the buffer stays in cache and a large image
// (84×84 Atari frames lower to 20×20 patches of 256 values each) at a
// learner's batch does not take hundreds of megabytes per Workspace. One
// chunk is still a GEMM of thousands of rows, as large as OpenBLAS needs.
const colFloats = 1 << 17

// chunk is how many images of l are lowered at once.
func (l *convLayer) chunk() int { return max(1, colFloats/(l.pixels()*l.cols())) }

// growConv sizes the activation buffer of every convolution for batch
// images, and the im2col buffers for one chunk.
func (m *ActorCritic) growConv(ws *Workspace, batch int) {
	if cap(ws.conv) < len(m.conv) {
		ws.conv = append(ws.conv[:cap(ws.conv)], make([][]float32, len(m.conv)-cap(ws.conv))...)
	}
	ws.conv = ws.conv[:len(m.conv)]
	cols := 0
	for i := range m.conv {
		l := &m.conv[i]
		ws.conv[i] = grow(ws.conv[i], batch*l.outSize())
		if !l.identity() {
			cols = max(cols, min(batch, l.chunk())*l.pixels()*l.cols())
		}
	}
	ws.col = grow(ws.col, cols)
}

// forwardConv runs the convolutions on x ([batch, ObsDim]) into ws.conv
// and returns the last one's output, the features of the dense layers.
// Each chunk of images is lowered by im2col to a [pixels, cols] matrix
// per image and multiplied by the weights in one GEMM, whose rows are the
// output's pixels in (image, y, x) order and columns its channels: the
// output's own channels-last layout, so nothing is transposed.
func (m *ActorCritic) forwardConv(ws *Workspace, x []float32, batch int) []float32 {
	for i := range m.conv {
		l := &m.conv[i]
		y := ws.conv[i]
		w, b := m.params[l.w:l.w+l.cols()*l.outC], m.params[l.b:l.b+l.outC]
		// Each chunk's patches are a dense layer's input: a row a pixel.
		for img, per := 0, l.chunk(); img < batch; img += per {
			n := min(per, batch-img)
			in := x[img*l.inSize() : (img+n)*l.inSize()]
			col := in
			if !l.identity() {
				col = ws.col[:n*l.pixels()*l.cols()]
				l.im2col(in, n, col)
			}
			denseLayer(col, w, b, y[img*l.outSize():(img+n)*l.outSize()], n*l.pixels(), l.cols(), l.outC, m.spec.Activation)
		}
		x = y
	}
	return x
}

// backwardConv backpropagates dy, the gradient with respect to the last
// convolution's output (a Workspace buffer, modified in place), through
// the convolutions, adding their parameter gradients to grad. The input
// gradient of the first one, the observations', is not computed: no loss
// here needs it.
//
// The patches are lowered again rather than kept from Forward: im2col is
// a copy, cheap next to the GEMMs, and keeping them would cost Kernel²
// times the input's memory for the whole batch.
func (m *ActorCritic) backwardConv(ws *Workspace, dy []float32, batch int, grad []float32) {
	ws.dcol = grow(ws.dcol, len(ws.col))
	bufs := [2]*[]float32{&ws.gradConvA, &ws.gradConvB}
	next := 0
	for i := len(m.conv) - 1; i >= 0; i-- {
		l := &m.conv[i]
		activateGrad(m.spec.Activation, ws.conv[i], dy)
		sumRows(dy, grad[l.b:l.b+l.outC], batch*l.pixels(), l.outC)
		x := ws.obs
		var dx []float32
		if i > 0 {
			x = ws.conv[i-1]
			*bufs[next] = grow(*bufs[next], batch*l.inSize())
			dx = *bufs[next]
			next ^= 1
			if !l.identity() {
				clear(dx) // col2im adds into it
			}
		}
		w, gw := m.params[l.w:l.w+l.cols()*l.outC], grad[l.w:l.w+l.cols()*l.outC]
		for img, per := 0, l.chunk(); img < batch; img += per {
			n, rows := min(per, batch-img), min(per, batch-img)*l.pixels()
			in := x[img*l.inSize() : (img+n)*l.inSize()]
			d := dy[img*l.outSize() : (img+n)*l.outSize()]
			col := in
			if !l.identity() {
				col = ws.col[:rows*l.cols()]
				l.im2col(in, n, col)
			}
			matMulTransA(col, d, gw, rows, l.cols(), l.outC)
			if dx == nil {
				continue
			}
			dIn := dx[img*l.inSize() : (img+n)*l.inSize()]
			if l.identity() {
				matMulTransB(d, w, dIn, 0, rows, l.cols(), l.outC)
				continue
			}
			dcol := ws.dcol[:rows*l.cols()]
			matMulTransB(d, w, dcol, 0, rows, l.cols(), l.outC)
			l.col2im(dIn, n, dcol)
		}
		dy = dx
	}
}
