package nn_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distrl/distrl/nn"
)

func TestLayout(t *testing.T) {
	tests := []struct {
		name  string
		spec  nn.Spec
		names []string
	}{
		{"separate", nn.Spec{ObsDim: 4, Hidden: []int{8, 6}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2},
			[]string{"pi.0.w", "pi.0.b", "pi.1.w", "pi.1.b", "pi.2.w", "pi.2.b",
				"v.0.w", "v.0.b", "v.1.w", "v.1.b", "v.2.w", "v.2.b"}},
		{"shared gaussian", nn.Spec{ObsDim: 4, Hidden: []int{8, 6}, Activation: nn.ReLU, Head: nn.Gaussian, ActionDim: 3, SharedTrunk: true},
			[]string{"trunk.0.w", "trunk.0.b", "trunk.1.w", "trunk.1.b", "pi.0.w", "pi.0.b", "v.0.w", "v.0.b", "logstd"}},
		{"linear", nn.Spec{ObsDim: 5, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 3},
			[]string{"pi.0.w", "pi.0.b", "v.0.w", "v.0.b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newModel(t, tt.spec, 1)
			layout := m.Layout()
			var names []string
			off := 0
			for _, p := range layout {
				names = append(names, p.Name)
				if p.Offset != off {
					t.Errorf("%s at offset %d, want %d (tensors must be contiguous, in order)", p.Name, p.Offset, off)
				}
				off += p.Size()
			}
			if !slices.Equal(names, tt.names) {
				t.Errorf("names = %v, want %v", names, tt.names)
			}
			if off != m.NumParams() || len(m.Params()) != off {
				t.Errorf("tensors cover %d values, NumParams = %d, len(Params) = %d", off, m.NumParams(), len(m.Params()))
			}
			// Layout must hand out copies: editing one must not change the model.
			layout[0].Shape[0] = -1
			if m.Layout()[0].Shape[0] == -1 {
				t.Error("Layout aliases the model's shapes")
			}
		})
	}
}

func TestInitDeterministic(t *testing.T) {
	spec := cartPole
	a := newModel(t, spec, 42)
	b := newModel(t, spec, 42)
	c := newModel(t, spec, 43)
	if !slices.Equal(a.Params(), b.Params()) {
		t.Error("same seed gave different parameters")
	}
	if slices.Equal(a.Params(), c.Params()) {
		t.Error("different seeds gave identical parameters")
	}
}

// TestInitOrthogonal checks the init the doc promises: each weight matrix
// is gain times a matrix with orthonormal columns (or rows), biases are
// zero and the log-std starts at InitLogStd.
func TestInitOrthogonal(t *testing.T) {
	for _, shared := range []bool{false, true} {
		spec := nn.Spec{ObsDim: 4, Hidden: []int{16, 3}, Activation: nn.Tanh, Head: nn.Gaussian,
			ActionDim: 2, SharedTrunk: shared, InitLogStd: -0.7}
		m := newModel(t, spec, 7)
		p := m.Params()
		head := len(spec.Hidden) // index of the head layer in "pi" and "v"
		if shared {
			head = 0
		}
		gains := map[string]float64{
			"pi." + strconv.Itoa(head) + ".w": 0.01,
			"v." + strconv.Itoa(head) + ".w":  1,
		}
		for _, info := range m.Layout() {
			vals := p[info.Offset : info.Offset+info.Size()]
			switch {
			case info.Name == "logstd":
				for _, v := range vals {
					if v != spec.InitLogStd {
						t.Errorf("logstd = %v, want %v", v, spec.InitLogStd)
					}
				}
			case strings.HasSuffix(info.Name, ".b"):
				for _, v := range vals {
					if v != 0 {
						t.Errorf("%s has nonzero bias %v", info.Name, v)
						break
					}
				}
			default:
				gain, ok := gains[info.Name]
				if !ok {
					gain = math.Sqrt2
				}
				checkOrthogonal(t, info.Name, vals, info.Shape[0], info.Shape[1], gain)
			}
		}
	}
}

func checkOrthogonal(t *testing.T, name string, w []float32, in, out int, gain float64) {
	t.Helper()
	// Gram matrix of the shorter side: WᵀW (out×out) if in >= out, else WWᵀ.
	k, n := out, in
	at := func(vec, i int) float64 { return float64(w[i*out+vec]) } // column vec
	if in < out {
		k, n = in, out
		at = func(vec, i int) float64 { return float64(w[vec*out+i]) } // row vec
	}
	for a := range k {
		for b := range k {
			var s float64
			for i := range n {
				s += at(a, i) * at(b, i)
			}
			want := 0.0
			if a == b {
				want = gain * gain
			}
			if !near(s, want, 1e-5*gain*gain+1e-9) {
				t.Errorf("%s: gram[%d][%d] = %v, want %v", name, a, b, s, want)
				return
			}
		}
	}
}

func TestSetParams(t *testing.T) {
	m := newModel(t, cartPole, 1)
	n := m.NumParams()
	for _, l := range []int{0, n - 1, n + 1} {
		if err := m.SetParams(make([]float32, l)); err == nil {
			t.Errorf("SetParams(len %d) succeeded for %d params", l, n)
		}
	}
	p := make([]float32, n)
	for i := range p {
		p[i] = float32(i)
	}
	if err := m.SetParams(p); err != nil {
		t.Fatalf("SetParams: %v", err)
	}
	p[0] = -1 // SetParams copies: the caller's slice is not retained
	if m.Params()[0] != 0 || m.Params()[n-1] != float32(n-1) {
		t.Errorf("params after SetParams: first %v last %v", m.Params()[0], m.Params()[n-1])
	}
	c := m.Clone()
	c.Params()[1] = 99
	if m.Params()[1] == 99 {
		t.Error("Clone shares the parameter vector")
	}
}

// handNet is a 2-2-2 tanh network with separate trunks whose outputs were
// worked out by hand (the intermediate values are in the comments).
func handNet(t *testing.T) *nn.ActorCritic {
	t.Helper()
	m := newModel(t, nn.Spec{ObsDim: 2, Hidden: []int{2}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 2}, 1)
	params := []float32{
		0.5, -0.5, 0.25, 1, // pi.0.w, rows are inputs: [[0.5, -0.5], [0.25, 1]]
		0.1, -0.2, // pi.0.b
		1, 2, -1, 0.5, // pi.1.w
		0, 0.3, // pi.1.b
		0.3, 0.2, -0.4, 0.1, // v.0.w
		0, 0.05, // v.0.b
		1.5, -2, // v.1.w
		0.7, // v.1.b
	}
	if err := m.SetParams(params); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestForwardHandComputed(t *testing.T) {
	m := handNet(t)
	obs := []float32{1, -1, 0.5, 2}
	// Row 0: policy pre-activations 0.35, -1.7 → tanh 0.3363755, -0.9354091
	//   logits (h0 - h1, 2h0 + 0.5h1 + 0.3); value pre-activations 0.7, 0.15.
	// Row 1: policy pre-activations 0.85, 1.55 → tanh 0.6910695, 0.9137855;
	//   value pre-activations -0.65, 0.35.
	wantLogits := []float64{1.2717846, 0.5050466, -0.2227160, 2.1390317}
	wantValues := []float64{1.3087816, -0.8302560}
	_, out := forward(t, m, obs, 2)
	for i, w := range wantLogits {
		if !near(float64(out.Logits[i]), w, 1e-6) {
			t.Errorf("Logits[%d] = %v, want %v", i, out.Logits[i], w)
		}
	}
	for i, w := range wantValues {
		if !near(float64(out.Values[i]), w, 1e-6) {
			t.Errorf("Values[%d] = %v, want %v", i, out.Values[i], w)
		}
	}
	if len(out.Mean) != 0 || len(out.LogStd) != 0 {
		t.Errorf("categorical head filled Mean %v / LogStd %v", out.Mean, out.LogStd)
	}
}

func TestForwardShapeErrors(t *testing.T) {
	m := newModel(t, cartPole, 1)
	obs := make([]float32, 8)
	tests := []struct {
		name  string
		obs   []float32
		batch int
		ws    *nn.Workspace
		out   *nn.Output
		shape bool // whether the error must wrap ErrShape
	}{
		{"nil workspace", obs, 2, nil, new(nn.Output), false},
		{"nil output", obs, 2, nn.NewWorkspace(), nil, false},
		{"zero batch", obs, 0, nn.NewWorkspace(), new(nn.Output), false},
		{"negative batch", obs, -2, nn.NewWorkspace(), new(nn.Output), false},
		{"batch too large", obs, 3, nn.NewWorkspace(), new(nn.Output), true},
		{"batch too small", obs, 1, nn.NewWorkspace(), new(nn.Output), true},
		{"ragged obs", obs[:7], 2, nn.NewWorkspace(), new(nn.Output), true},
		{"huge batch", obs, math.MaxInt, nn.NewWorkspace(), new(nn.Output), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Forward(tt.obs, tt.batch, tt.ws, tt.out)
			if err == nil {
				t.Fatal("Forward succeeded")
			}
			if tt.shape && !errors.Is(err, nn.ErrShape) {
				t.Errorf("error %v does not wrap ErrShape", err)
			}
		})
	}
}

func TestBackwardErrors(t *testing.T) {
	m := newModel(t, cartPole, 1)
	g := newModel(t, nn.Spec{ObsDim: 4, Hidden: []int{8}, Activation: nn.Tanh, Head: nn.Gaussian, ActionDim: 2}, 1)
	obs := make([]float32, 3*4)
	ws, _ := forward(t, m, obs, 3)
	gws, _ := forward(t, g, obs, 3)
	grad := make([]float32, m.NumParams())
	ok := &nn.Output{Logits: make([]float32, 6), Values: make([]float32, 3)}
	tests := []struct {
		name  string
		m     *nn.ActorCritic
		ws    *nn.Workspace
		batch int
		dOut  *nn.Output
		grad  []float32
	}{
		{"nil workspace", m, nil, 3, ok, grad},
		{"nil dOut", m, ws, 3, ok, grad},
		{"fresh workspace", m, nn.NewWorkspace(), 3, ok, grad},
		{"other model's workspace", m, gws, 3, ok, grad},
		{"batch mismatch", m, ws, 2, ok, grad},
		{"short grad", m, ws, 3, ok, grad[1:]},
		{"short logits", m, ws, 3, &nn.Output{Logits: make([]float32, 5)}, grad},
		{"mean for categorical", m, ws, 3, &nn.Output{Mean: make([]float32, 6)}, grad},
		{"logstd for categorical", m, ws, 3, &nn.Output{LogStd: make([]float32, 2)}, grad},
		{"long values", m, ws, 3, &nn.Output{Values: make([]float32, 4)}, grad},
		{"logits for gaussian", g, gws, 3, &nn.Output{Logits: make([]float32, 6)}, make([]float32, g.NumParams())},
		{"bad logstd", g, gws, 3, &nn.Output{LogStd: make([]float32, 3)}, make([]float32, g.NumParams())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dOut := tt.dOut
			if tt.name == "nil dOut" {
				dOut = nil
			}
			if err := tt.m.Backward(tt.ws, tt.batch, dOut, tt.grad); err == nil {
				t.Fatal("Backward succeeded")
			}
		})
	}
	for i, v := range grad {
		if v != 0 {
			t.Fatalf("failed Backward calls wrote grad[%d] = %v", i, v)
		}
	}
}

// TestWorkspaceReuse checks that a Workspace and Output carried across
// networks and batch sizes give the same results as fresh ones, so no
// stale activation or output length leaks from one call into the next.
func TestWorkspaceReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specs := []nn.Spec{
		cartPole,
		{ObsDim: 3, Hidden: []int{5}, Activation: nn.ReLU, Head: nn.Gaussian, ActionDim: 2, SharedTrunk: true},
		{ObsDim: 6, Hidden: []int{130, 7, 9}, Activation: nn.Tanh, Head: nn.Categorical, ActionDim: 4},
		minAtar,
		{ObsDim: 48, InputShape: []int{4, 4, 3}, Conv: []nn.ConvLayer{{Filters: 5, Kernel: 2, Stride: 2}, {Filters: 3, Kernel: 1, Stride: 1}},
			Hidden: []int{6}, Activation: nn.Tanh, Head: nn.Gaussian, ActionDim: 2},
	}
	ws, out := nn.NewWorkspace(), new(nn.Output)
	for round := range 2 {
		for i, spec := range specs {
			m := newModel(t, spec, int64(i))
			for _, batch := range []int{7, 1, 300} {
				obs := randVec(rng, batch*spec.ObsDim, 1)
				if err := m.Forward(obs, batch, ws, out); err != nil {
					t.Fatal(err)
				}
				_, want := forward(t, m, obs, batch)
				for _, pair := range [][2][]float32{{out.Logits, want.Logits}, {out.Mean, want.Mean},
					{out.LogStd, want.LogStd}, {out.Values, want.Values}} {
					if !slices.Equal(pair[0], pair[1]) {
						t.Fatalf("round %d spec %d batch %d: reused workspace gave %v, fresh %v",
							round, i, batch, pair[0], pair[1])
					}
				}
			}
		}
	}
}

// TestForwardNoAlloc checks the Workspace promise at actor-sized batches,
// and Forward's at a large one. (Backward's large GEMMs may allocate
// inside gonum, which runs them on several goroutines.)
func TestForwardNoAlloc(t *testing.T) {
	for _, batch := range []int{1, 64} {
		m := newModel(t, cartPole, 1)
		obs := make([]float32, batch*cartPole.ObsDim)
		ws, out := forward(t, m, obs, batch)
		grad := make([]float32, m.NumParams())
		dOut := &nn.Output{Logits: make([]float32, batch*2), Values: make([]float32, batch)}
		if err := m.Backward(ws, batch, dOut, grad); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _ = m.Forward(obs, batch, ws, out) }); n != 0 {
			t.Errorf("batch %d: Forward allocates %v times per call", batch, n)
		}
		if n := testing.AllocsPerRun(20, func() { _ = m.Backward(ws, batch, dOut, grad) }); n != 0 {
			t.Errorf("batch %d: Backward allocates %v times per call", batch, n)
		}
	}
	// A policy worker's batch: Forward stays on the calling goroutine
	// (serialRows), so it allocates nothing either.
	const batch = 512
	m := newModel(t, cartPole, 1)
	obs := make([]float32, batch*cartPole.ObsDim)
	ws, out := forward(t, m, obs, batch)
	if n := testing.AllocsPerRun(20, func() { _ = m.Forward(obs, batch, ws, out) }); n != 0 {
		t.Errorf("batch %d: Forward allocates %v times per call", batch, n)
	}
}

// TestConcurrentForward backs the documented guarantee that goroutines
// with their own Workspace and Output may share one network (run it with
// -race).
func TestConcurrentForward(t *testing.T) {
	m := newModel(t, cartPole, 1)
	const batch = 8
	obs := randVec(rand.New(rand.NewPCG(1, 1)), batch*cartPole.ObsDim, 1)
	_, want := forward(t, m, obs, batch)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ws, out := nn.NewWorkspace(), new(nn.Output)
			grad := make([]float32, m.NumParams())
			for range 50 {
				if err := m.Forward(obs, batch, ws, out); err != nil {
					errs <- err
					return
				}
				if !slices.Equal(out.Logits, want.Logits) {
					errs <- errors.New("concurrent Forward gave different logits")
					return
				}
				if err := m.Backward(ws, batch, out, grad); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
