package nn_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distrl/distrl/nn"
	"github.com/vmihailenco/msgpack/v5"
)

// minAtar is the network of the MinAtar paper (Young & Tian 2019) in its
// actor-critic form: a 10×10×4 observation, one valid 3×3 convolution of
// 16 filters, a dense layer of 128, six actions.
var minAtar = nn.Spec{ObsDim: 400, InputShape: []int{10, 10, 4}, Conv: []nn.ConvLayer{{Filters: 16, Kernel: 3, Stride: 1}},
	Hidden: []int{128}, Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 6, SharedTrunk: true}

// convSpec returns a spec of input h×w×c with the given convolutions.
func convSpec(h, w, c int, conv ...nn.ConvLayer) nn.Spec {
	return nn.Spec{ObsDim: h * w * c, InputShape: []int{h, w, c}, Conv: conv, Hidden: []int{7},
		Activation: nn.ReLU, Head: nn.Categorical, ActionDim: 3}
}

// refNet evaluates a network in float64 straight from its spec and
// parameter layout: a direct convolution (a sum over each window, no
// im2col), then the dense layers. It shares no code with nn's passes, so
// agreement checks both the passes and the documented layout.
type refNet struct {
	spec   nn.Spec
	params []float32
	info   map[string]nn.ParamInfo
}

func newRefNet(m *nn.ActorCritic) *refNet {
	r := &refNet{spec: m.Spec(), params: m.Params(), info: map[string]nn.ParamInfo{}}
	for _, p := range m.Layout() {
		r.info[p.Name] = p
	}
	return r
}

func (r *refNet) tensor(name string) []float32 {
	p := r.info[name]
	return r.params[p.Offset : p.Offset+p.Size()]
}

func (r *refNet) act(x []float64) {
	for i, v := range x {
		if r.spec.Activation == nn.ReLU {
			x[i] = max(v, 0)
		} else {
			x[i] = math.Tanh(v)
		}
	}
}

// conv is layer i on one image x of h×w×c, returning the output and its
// shape.
func (r *refNet) conv(i int, x []float64, h, w, c int) (y []float64, oh, ow, f int) {
	l := r.spec.Conv[i]
	k, s, p := l.Kernel, l.Stride, l.Padding
	wt, b := r.tensor(fmt.Sprintf("conv.%d.w", i)), r.tensor(fmt.Sprintf("conv.%d.b", i))
	oh, ow, f = (h+2*p-k)/s+1, (w+2*p-k)/s+1, l.Filters
	y = make([]float64, oh*ow*f)
	for oy := range oh {
		for ox := range ow {
			for fi := range f {
				sum := float64(b[fi])
				for ky := range k {
					for kx := range k {
						iy, ix := oy*s-p+ky, ox*s-p+kx
						if iy < 0 || iy >= h || ix < 0 || ix >= w {
							continue
						}
						for ci := range c {
							sum += x[(iy*w+ix)*c+ci] * float64(wt[((ky*k+kx)*c+ci)*f+fi])
						}
					}
				}
				y[(oy*ow+ox)*f+fi] = sum
			}
		}
	}
	r.act(y)
	return y, oh, ow, f
}

func (r *refNet) dense(name string, x []float64, act bool) []float64 {
	p := r.info[name+".w"]
	in, out := p.Shape[0], p.Shape[1]
	w, b := r.tensor(name+".w"), r.tensor(name+".b")
	y := make([]float64, out)
	for j := range out {
		y[j] = float64(b[j])
		for i := range in {
			y[j] += x[i] * float64(w[i*out+j])
		}
	}
	if act {
		r.act(y)
	}
	return y
}

// forward returns the policy head's output and the value of one
// observation.
func (r *refNet) forward(obs []float32) (head []float64, value float64) {
	x := make([]float64, len(obs))
	for i, v := range obs {
		x[i] = float64(v)
	}
	if len(r.spec.Conv) > 0 {
		h, w, c := r.spec.InputShape[0], r.spec.InputShape[1], r.spec.InputShape[2]
		for i := range r.spec.Conv {
			x, h, w, c = r.conv(i, x, h, w, c)
		}
	}
	chain := func(net string, x []float64, hidden int, head bool) []float64 {
		for i := range hidden {
			x = r.dense(net+"."+strconv.Itoa(i), x, true)
		}
		if head {
			x = r.dense(net+"."+strconv.Itoa(hidden), x, false)
		}
		return x
	}
	nh := len(r.spec.Hidden)
	if r.spec.SharedTrunk {
		x = chain("trunk", x, nh, false)
		nh = 0
	}
	return chain("pi", x, nh, true), chain("v", x, nh, true)[0]
}

// TestConvForwardMatchesDirect checks the im2col forward pass against a
// direct convolution for many shapes: kernels from 1×1 (which skips
// im2col) up to the whole image, strides that do and do not divide the
// input, padding, stacked layers, both heads and trunks, and batches that
// span several im2col chunks.
func TestConvForwardMatchesDirect(t *testing.T) {
	c := func(f, k, s, p int) nn.ConvLayer { return nn.ConvLayer{Filters: f, Kernel: k, Stride: s, Padding: p} }
	tests := []struct {
		name string
		spec nn.Spec
	}{
		{"minatar", minAtar},
		{"valid 3x3", convSpec(6, 5, 2, c(4, 3, 1, 0))},
		{"padded 3x3", convSpec(6, 5, 2, c(4, 3, 1, 1))},
		{"stride 2 uneven", convSpec(7, 6, 3, c(5, 3, 2, 0))},
		{"stride 2 padded", convSpec(7, 6, 3, c(5, 3, 2, 1))},
		{"stride 3 padded 5x5", convSpec(9, 8, 1, c(2, 5, 3, 2))},
		{"1x1", convSpec(4, 4, 6, c(3, 1, 1, 0))},
		{"1x1 stride 2", convSpec(5, 4, 2, c(3, 1, 2, 0))},
		{"whole image", convSpec(4, 4, 2, c(6, 4, 1, 0))},
		{"narrow filters", convSpec(5, 5, 3, c(1, 2, 1, 0))},
		{"stack", convSpec(9, 9, 2, c(4, 3, 1, 1), c(6, 3, 2, 0), c(3, 1, 1, 0))},
		{"nature-like", convSpec(36, 36, 4, c(8, 8, 4, 0), c(16, 4, 2, 0), c(16, 3, 1, 0))},
		{"many chunks", convSpec(12, 12, 8, c(16, 3, 1, 1))},
		{"tanh gaussian", func() nn.Spec {
			s := convSpec(6, 6, 2, c(3, 3, 2, 1))
			s.Activation, s.Head, s.ActionDim, s.InitLogStd = nn.Tanh, nn.Gaussian, 2, -0.5
			return s
		}()},
		{"shared, no hidden", func() nn.Spec {
			s := convSpec(5, 6, 2, c(3, 2, 1, 0))
			s.Hidden, s.SharedTrunk = nil, true
			return s
		}()},
		{"separate, two hidden", func() nn.Spec {
			s := convSpec(5, 6, 2, c(3, 2, 2, 1))
			s.Hidden = []int{9, 5}
			return s
		}()},
	}
	for _, tt := range tests {
		for _, batch := range []int{1, 3, 30} {
			t.Run(tt.name+"/batch="+strconv.Itoa(batch), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(batch), 7))
				m := newModel(t, tt.spec, 1)
				setUnitParams(t, m, rng)
				obs := randVec(rng, batch*tt.spec.ObsDim, 1)
				_, out := forward(t, m, obs, batch)
				ref := newRefNet(m)
				a := tt.spec.ActionDim
				for b := range batch {
					head, value := ref.forward(obs[b*tt.spec.ObsDim : (b+1)*tt.spec.ObsDim])
					got := append(slices.Clone(headOut(out)[b*a:(b+1)*a]), out.Values[b])
					want := append(head, value)
					for i := range want {
						if !near(float64(got[i]), want[i], 1e-4*max(1, math.Abs(want[i]))) {
							t.Fatalf("row %d output %d: %v, direct convolution %v", b, i, got[i], want[i])
						}
					}
				}
			})
		}
	}
}

func TestConvSpecValidate(t *testing.T) {
	base := convSpec(10, 8, 3, nn.ConvLayer{Filters: 4, Kernel: 3, Stride: 1})
	tests := []struct {
		name string
		edit func(s *nn.Spec)
		want string // a piece of the error; "" for a valid spec
	}{
		{"valid", func(*nn.Spec) {}, ""},
		{"minatar", func(s *nn.Spec) { *s = minAtar }, ""},
		{"shape without conv", func(s *nn.Spec) { s.Conv = nil }, ""},
		{"padding kernel-1", func(s *nn.Spec) { s.Conv[0].Padding = 2 }, ""},
		{"kernel fills the padded input", func(s *nn.Spec) { s.Conv[0] = nn.ConvLayer{Filters: 1, Kernel: 10, Stride: 1, Padding: 1} }, ""},
		{"conv without shape", func(s *nn.Spec) { s.InputShape = nil }, "needs InputShape"},
		{"2-d shape", func(s *nn.Spec) { s.InputShape = []int{80, 3} }, "must be [H, W, C]"},
		{"4-d shape", func(s *nn.Spec) { s.InputShape = []int{10, 8, 3, 1} }, "must be [H, W, C]"},
		{"zero height", func(s *nn.Spec) { s.InputShape = []int{0, 8, 3} }, "InputShape[0] must be positive"},
		{"negative channels", func(s *nn.Spec) { s.InputShape = []int{10, 8, -3} }, "InputShape[2] must be positive"},
		{"shape disagrees with ObsDim", func(s *nn.Spec) { s.ObsDim = 239 }, "does not have ObsDim 239"},
		{"shape disagrees without conv", func(s *nn.Spec) { s.Conv, s.ObsDim = nil, 241 }, "does not have ObsDim"},
		{"overflowing shape", func(s *nn.Spec) { s.InputShape = []int{math.MaxInt, math.MaxInt, 2} }, "does not have ObsDim"},
		{"zero filters", func(s *nn.Spec) { s.Conv[0].Filters = 0 }, "Filters must be"},
		{"zero kernel", func(s *nn.Spec) { s.Conv[0].Kernel = 0 }, "Kernel must be"},
		{"huge kernel", func(s *nn.Spec) { s.Conv[0].Kernel = math.MaxInt }, "Kernel must be"},
		{"zero stride", func(s *nn.Spec) { s.Conv[0].Stride = 0 }, "Stride must be"},
		{"negative padding", func(s *nn.Spec) { s.Conv[0].Padding = -1 }, "Padding must be"},
		{"padding = kernel", func(s *nn.Spec) { s.Conv[0].Padding = 3 }, "Padding must be"},
		{"kernel too large", func(s *nn.Spec) { s.Conv[0].Kernel = 9 }, "larger than the padded 10×8 input"},
		{"second layer too large", func(s *nn.Spec) {
			s.Conv = append(s.Conv, nn.ConvLayer{Filters: 2, Kernel: 7, Stride: 1})
		}, "Conv[1]"},
		{"huge filters", func(s *nn.Spec) { s.Conv[0].Filters = 1 << 27 }, "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			s.InputShape = slices.Clone(base.InputShape)
			s.Conv = slices.Clone(base.Conv)
			tt.edit(&s)
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				newModel(t, s, 1)
				return
			}
			if err == nil || !errors.Is(err, nn.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an ErrInvalidSpec saying %q", err, tt.want)
			}
			if _, err := nn.NewActorCritic(s, 1); !errors.Is(err, nn.ErrInvalidSpec) {
				t.Errorf("NewActorCritic: %v, want ErrInvalidSpec", err)
			}
		})
	}
}

// TestConvLayout: the convolutions come first, with the documented names
// and shapes, and their weights get the hidden layers' orthogonal init.
func TestConvLayout(t *testing.T) {
	spec := convSpec(9, 9, 2, nn.ConvLayer{Filters: 4, Kernel: 3, Stride: 2, Padding: 1}, nn.ConvLayer{Filters: 5, Kernel: 2, Stride: 1})
	spec.SharedTrunk = true
	m := newModel(t, spec, 3)
	want := []struct {
		name  string
		shape []int
	}{
		{"conv.0.w", []int{3, 3, 2, 4}}, {"conv.0.b", []int{4}},
		{"conv.1.w", []int{2, 2, 4, 5}}, {"conv.1.b", []int{5}},
		// 9×9 → 5×5×4 → 4×4×5 = 80 features.
		{"trunk.0.w", []int{80, 7}}, {"trunk.0.b", []int{7}},
		{"pi.0.w", []int{7, 3}}, {"pi.0.b", []int{3}}, {"v.0.w", []int{7, 1}}, {"v.0.b", []int{1}},
	}
	layout := m.Layout()
	if len(layout) != len(want) {
		t.Fatalf("layout %+v, want %d tensors", layout, len(want))
	}
	off := 0
	for i, p := range layout {
		if p.Name != want[i].name || !slices.Equal(p.Shape, want[i].shape) || p.Offset != off {
			t.Errorf("tensor %d: %s %v at %d, want %s %v at %d", i, p.Name, p.Shape, p.Offset, want[i].name, want[i].shape, off)
		}
		off += p.Size()
		if strings.HasPrefix(p.Name, "conv.") && strings.HasSuffix(p.Name, ".w") {
			rows := p.Shape[0] * p.Shape[1] * p.Shape[2]
			checkOrthogonal(t, p.Name, m.Params()[p.Offset:p.Offset+p.Size()], rows, p.Shape[3], math.Sqrt2)
		}
	}
	if off != m.NumParams() {
		t.Errorf("tensors cover %d values of %d", off, m.NumParams())
	}
	// Spec returns copies of the conv fields.
	s := m.Spec()
	s.Conv[0].Filters, s.InputShape[0] = 99, 99
	if got := m.Spec(); got.Conv[0].Filters != 4 || got.InputShape[0] != 9 {
		t.Error("Spec aliases the network's conv layers or input shape")
	}
}

// TestConvSpecRoundTrip: a conv spec sent through msgpack (as policy
// configs and checkpoints are) builds the same network, and a network
// rebuilt from it takes the original's parameters and answers alike.
func TestConvSpecRoundTrip(t *testing.T) {
	wire, err := msgpack.Marshal(minAtar)
	if err != nil {
		t.Fatal(err)
	}
	var got nn.Spec
	if err := msgpack.Unmarshal(wire, &got); err != nil {
		t.Fatal(err)
	}
	a, b := newModel(t, minAtar, 5), newModel(t, got, 5)
	if !slices.Equal(a.Params(), b.Params()) || fmt.Sprint(a.Layout()) != fmt.Sprint(b.Layout()) {
		t.Fatal("the decoded spec builds another network")
	}
	var layer nn.ConvLayer
	if err := msgpack.Unmarshal(must(msgpack.Marshal(map[string]any{"filters": 16, "kernel": 3, "stride": 1})), &layer); err != nil {
		t.Fatal(err)
	}
	if layer != (nn.ConvLayer{Filters: 16, Kernel: 3, Stride: 1}) {
		t.Errorf("conv layer from its config keys: %+v", layer)
	}
	c := newModel(t, got, 6)
	if err := c.SetParams(a.Params()); err != nil {
		t.Fatal(err)
	}
	obs := randVec(rand.New(rand.NewPCG(1, 1)), 3*minAtar.ObsDim, 1)
	_, oa := forward(t, a, obs, 3)
	_, oc := forward(t, c, obs, 3)
	if !slices.Equal(oa.Logits, oc.Logits) || !slices.Equal(oa.Values, oc.Values) {
		t.Error("a network given another's parameters answers differently")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestConvNoAlloc: a Workspace reused at one batch size makes forward and
// backward passes of a conv network allocation-free, im2col buffers
// included, at an actor's batch and at one that spans several chunks.
func TestConvNoAlloc(t *testing.T) {
	spec := minAtar
	for _, batch := range []int{1, 64, 300} {
		m := newModel(t, spec, 1)
		obs := make([]float32, batch*spec.ObsDim)
		ws, out := forward(t, m, obs, batch)
		grad := make([]float32, m.NumParams())
		dOut := &nn.Output{Logits: make([]float32, batch*spec.ActionDim), Values: make([]float32, batch)}
		if err := m.Backward(ws, batch, dOut, grad); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(10, func() { _ = m.Forward(obs, batch, ws, out) }); n != 0 {
			t.Errorf("batch %d: Forward allocates %v times per call", batch, n)
		}
		if nn.BLAS() == "gonum" {
			continue // gonum's parallel GEMMs allocate in Backward (see Workspace)
		}
		if n := testing.AllocsPerRun(10, func() { _ = m.Backward(ws, batch, dOut, grad) }); n != 0 {
			t.Errorf("batch %d: Backward allocates %v times per call", batch, n)
		}
	}
}

// TestArchitecture: the layers Architecture describes are the layout's
// tensors, in forward order, with the shapes the passes use, for conv and
// dense networks, shared and separate trunks, both heads.
func TestArchitecture(t *testing.T) {
	c := func(f, k, s, p int) nn.ConvLayer { return nn.ConvLayer{Filters: f, Kernel: k, Stride: s, Padding: p} }
	gaussian := cartPole
	gaussian.Head, gaussian.ActionDim = nn.Gaussian, 3
	shared := minAtar
	shared.Hidden = []int{7, 5}
	for name, spec := range map[string]nn.Spec{"cartpole": cartPole, "gaussian": gaussian, "minatar": minAtar, "shared two hidden": shared,
		"stack": convSpec(9, 9, 2, c(4, 3, 1, 1), c(6, 3, 2, 0))} {
		t.Run(name, func(t *testing.T) {
			m := newModel(t, spec, 1)
			layout := map[string]nn.ParamInfo{}
			for _, p := range m.Layout() {
				layout[p.Name] = p
			}
			a := m.Architecture()
			in := spec.ObsDim
			for i, l := range a.Conv {
				w, b := layout["conv."+strconv.Itoa(i)+".w"], layout["conv."+strconv.Itoa(i)+".b"]
				if l.W != w.Offset || l.B != b.Offset || !slices.Equal(w.Shape, []int{l.Kernel, l.Kernel, l.InC, l.OutC}) ||
					l.InH*l.InW*l.InC != in || l.Kernel != spec.Conv[i].Kernel || l.Stride != spec.Conv[i].Stride ||
					l.OutH != (l.InH+2*l.Padding-l.Kernel)/l.Stride+1 || l.OutW != (l.InW+2*l.Padding-l.Kernel)/l.Stride+1 {
					t.Errorf("conv %d: %+v against %v %v from %d inputs", i, l, w, b, in)
				}
				in = l.OutH * l.OutW * l.OutC
			}
			if a.Features != in {
				t.Errorf("features %d, want %d", a.Features, in)
			}
			check := func(net string, ls []nn.DenseLayer, in int, head bool) int {
				for i, l := range ls {
					w, b := layout[net+"."+strconv.Itoa(i)+".w"], layout[net+"."+strconv.Itoa(i)+".b"]
					last := i == len(ls)-1
					if l.W != w.Offset || l.B != b.Offset || !slices.Equal(w.Shape, []int{l.In, l.Out}) || l.In != in ||
						l.Activated == (head && last) {
						t.Errorf("%s.%d: %+v against %v from %d inputs", net, i, l, w, in)
					}
					in = l.Out
				}
				return in
			}
			x := check("trunk", a.Trunk, a.Features, false)
			if check("pi", a.Pi, x, true) != spec.ActionDim || check("v", a.V, x, true) != 1 {
				t.Error("the heads' widths are not ActionDim and 1")
			}
			if p, ok := layout["logstd"]; ok != (a.LogStd >= 0) || ok && p.Offset != a.LogStd {
				t.Errorf("log-std at %d, layout %v", a.LogStd, p)
			}
		})
	}
}
