package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Initialisation gains, as in the common PPO baselines (OpenAI baselines,
// Stable-Baselines3, CleanRL): sqrt(2) keeps activations at a useful scale
// through the hidden layers, a tiny policy gain starts the policy close to
// uniform (or the Gaussian mean close to zero) so early exploration is not
// biased, and the value head starts at unit scale.
const (
	hiddenGain = math.Sqrt2
	policyGain = 0.01
	valueGain  = 1.0
)

// layer is one dense layer y = act(x·W + b) inside the flat vector.
type layer struct {
	in, out int
	w, b    int  // offsets of W ([in, out], row-major) and b ([out])
	act     bool // whether the hidden activation follows; false for heads
}

// ActorCritic is a policy network and a value network over the same
// observation, optionally sharing their hidden layers. See Spec.
//
// The methods that read parameters (Forward, Backward) may run concurrently
// with each other; SetParams and writes through Params must not overlap
// with any other call.
type ActorCritic struct {
	spec   Spec
	params []float32
	layout []ParamInfo

	// A network is the convolutions (empty without Spec.Conv), whose output
	// feeds three chains of dense layers: the trunk (shared hidden layers,
	// empty unless Spec.SharedTrunk) feeds both pi and v. Keeping the
	// shared and separate cases in one shape lets Forward and Backward
	// treat them with the same code.
	conv         []convLayer
	features     int // width of the dense layers' input: ObsDim, or the last convolution's output
	trunk, pi, v []layer
	logStd       int // offset of the log-std vector, or -1
	maxWidth     int // widest layer, which sizes the backward scratch buffers
}

// NewActorCritic builds the network described by spec with weights drawn
// from a generator seeded with seed, so that equal seeds give identical
// parameters: runs are reproducible, and a process can rebuild another's
// initial network from the spec and seed alone.
//
// Weights are orthogonal (a Gram-Schmidt orthonormalised Gaussian matrix,
// the Haar-distributed initialisation of Saxe et al. that PPO baselines
// use) times a gain of sqrt(2) for hidden layers, 0.01 for the policy head
// and 1 for the value head; biases start at zero and a Gaussian head's
// log-std at spec.InitLogStd. A convolution's weights are initialised as a
// hidden layer's, viewed as the [Kernel·Kernel·Cin, Filters] matrix they
// are (as PyTorch's orthogonal_ does for a Conv2d, which the PPO baselines'
// Atari networks use): gain sqrt(2) suits the ReLU that usually follows.
func NewActorCritic(spec Spec, seed int64) (*ActorCritic, error) {
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("nn: new actor-critic: %w", err)
	}
	m := &ActorCritic{spec: spec.clone(), logStd: -1, features: spec.ObsDim}
	n := 0
	geoms, _ := spec.convGeometry() // cannot fail: Validate ran it
	for i, g := range geoms {
		prefix := "conv." + strconv.Itoa(i)
		l := convLayer{convGeom: g, w: n, b: n + g.cols()*g.outC}
		m.layout = append(m.layout,
			ParamInfo{Name: prefix + ".w", Shape: []int{g.k, g.k, g.inC, g.outC}, Offset: l.w},
			ParamInfo{Name: prefix + ".b", Shape: []int{g.outC}, Offset: l.b})
		n += g.cols()*g.outC + g.outC
		m.conv = append(m.conv, l)
		m.features = g.outSize()
	}
	add := func(net string, idx, in, out int, act bool) layer {
		prefix := net + "." + strconv.Itoa(idx)
		l := layer{in: in, out: out, w: n, b: n + in*out, act: act}
		m.layout = append(m.layout,
			ParamInfo{Name: prefix + ".w", Shape: []int{in, out}, Offset: l.w},
			ParamInfo{Name: prefix + ".b", Shape: []int{out}, Offset: l.b})
		n += in*out + out
		m.maxWidth = max(m.maxWidth, in, out)
		return l
	}
	chain := func(net string, in int, hidden []int, headOut int) []layer {
		var ls []layer
		for i, h := range hidden {
			ls = append(ls, add(net, i, in, h, true))
			in = h
		}
		if headOut > 0 {
			ls = append(ls, add(net, len(hidden), in, headOut, false))
		}
		return ls
	}
	if spec.SharedTrunk {
		m.trunk = chain("trunk", m.features, spec.Hidden, 0)
		in := m.features
		if len(spec.Hidden) > 0 {
			in = spec.Hidden[len(spec.Hidden)-1]
		}
		m.pi = chain("pi", in, nil, spec.ActionDim)
		m.v = chain("v", in, nil, 1)
	} else {
		m.pi = chain("pi", m.features, spec.Hidden, spec.ActionDim)
		m.v = chain("v", m.features, spec.Hidden, 1)
	}
	if spec.Head == Gaussian {
		m.logStd = n
		m.layout = append(m.layout, ParamInfo{Name: "logstd", Shape: []int{spec.ActionDim}, Offset: n})
		n += spec.ActionDim
	}
	m.params = make([]float32, n)

	rng := rand.New(rand.NewPCG(uint64(seed), 0x6e6e2d696e6974)) // "nn-init"
	for _, l := range m.conv {
		orthogonal(m.params[l.w:l.w+l.cols()*l.outC], l.cols(), l.outC, hiddenGain, rng)
	}
	initChain := func(ls []layer, headGain float64) {
		for _, l := range ls {
			gain := hiddenGain
			if !l.act {
				gain = headGain
			}
			orthogonal(m.params[l.w:l.w+l.in*l.out], l.in, l.out, gain, rng)
		}
	}
	initChain(m.trunk, hiddenGain)
	initChain(m.pi, policyGain)
	initChain(m.v, valueGain)
	if m.logStd >= 0 {
		for i := range spec.ActionDim {
			m.params[m.logStd+i] = spec.InitLogStd
		}
	}
	return m, nil
}

// orthogonal fills w ([in, out], row-major) with gain times a matrix whose
// columns (if in >= out) or rows (otherwise) are orthonormal.
//
// It orthonormalises min(in, out) Gaussian vectors of length max(in, out)
// by modified Gram-Schmidt in float64. Each vector is orthogonalised twice,
// which is enough to reach working precision even when earlier vectors were
// nearly dependent.
func orthogonal(w []float32, in, out int, gain float64, rng *rand.Rand) {
	rows, cols := max(in, out), min(in, out)
	q := make([]float64, rows*cols)
	for j := range cols {
		v := q[j*rows : (j+1)*rows]
		for {
			for i := range v {
				v[i] = rng.NormFloat64()
			}
			for range 2 {
				for k := range j {
					u := q[k*rows : (k+1)*rows]
					d := dot64(u, v)
					for i := range v {
						// The conversion forbids fusing this into an FMA,
						// which some architectures would do and others not,
						// so the init is the same everywhere.
						v[i] -= float64(d * u[i])
					}
				}
			}
			// The residual of a fresh Gaussian vector has expected norm
			// sqrt(rows-j) >= 1; a tiny one means it fell (numerically) into
			// the span of the previous ones, so draw again.
			if norm := math.Sqrt(dot64(v, v)); norm > 1e-6 {
				for i := range v {
					v[i] /= norm
				}
				break
			}
		}
	}
	for i := range in {
		for j := range out {
			var x float64
			if in >= out {
				x = q[j*rows+i] // column j of W is vector j
			} else {
				x = q[i*rows+j] // row i of W is vector i
			}
			w[i*out+j] = float32(gain * x)
		}
	}
}

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += float64(a[i] * b[i]) // no FMA; see orthogonal
	}
	return s
}

// Spec returns the architecture of m.
func (m *ActorCritic) Spec() Spec { return m.spec.clone() }

// Params returns the flat parameter vector itself, not a copy: reads see
// later updates, and writes (for example by an optimizer) change the
// network. Use SetParams to replace the parameters by a copy, and copy the
// result before handing it to code that may run concurrently with writers.
func (m *ActorCritic) Params() []float32 { return m.params }

// NumParams returns the length of the parameter vector.
func (m *ActorCritic) NumParams() int { return len(m.params) }

// Layout describes where each tensor lives in the parameter vector, in
// storage order. The result is a fresh copy the caller may modify.
func (m *ActorCritic) Layout() []ParamInfo {
	out := make([]ParamInfo, len(m.layout))
	for i, p := range m.layout {
		p.Shape = append([]int(nil), p.Shape...)
		out[i] = p
	}
	return out
}

// SetParams copies p into the parameter vector. p must have exactly
// NumParams elements; a vector for a different architecture is rejected
// rather than half-applied.
func (m *ActorCritic) SetParams(p []float32) error {
	if len(p) != len(m.params) {
		return fmt.Errorf("nn: set params: got %d values, network has %d", len(p), len(m.params))
	}
	copy(m.params, p)
	return nil
}

// Clone returns an independent copy of m, for example to give an actor
// goroutine a snapshot it can evaluate while the learner updates m.
func (m *ActorCritic) Clone() *ActorCritic {
	c := *m
	c.spec = m.spec.clone()
	c.params = append([]float32(nil), m.params...)
	// layout and the layer chains are never written after construction, so
	// the copies may share them.
	return &c
}

// DenseLayer is one dense layer y = act(x·W + b) as a network lays it out
// in its parameter vector: W [In, Out] row-major at offset W, b [Out] at
// B; Activated says whether the hidden activation follows (false for the
// heads).
type DenseLayer struct {
	In, Out   int
	W, B      int
	Activated bool
}

// ConvLayout is one convolution as a network lays it out: its input and
// output images ([H, W, C], channels last), kernel, stride and padding,
// and the offsets of its weights ([Kernel·Kernel·InC, OutC]) and biases.
type ConvLayout struct {
	InH, InW, InC, OutH, OutW, OutC int
	Kernel, Stride, Padding         int
	W, B                            int
}

// Architecture is what another device needs to run a network on its
// parameter vector: the convolutions, then the dense chains, the width
// of the dense layers' input, and the Gaussian head's log-stds.
type Architecture struct {
	Conv []ConvLayout
	// Trunk (shared hidden layers, empty unless Spec.SharedTrunk) feeds
	// Pi and V; each of Pi and V ends with its head.
	Trunk, Pi, V []DenseLayer
	Features     int // the dense layers' input: ObsDim, or the last convolution's output
	LogStd       int // offset of the Gaussian head's log-stds, or -1
}

// Architecture returns m's layers as its own passes run them.
func (m *ActorCritic) Architecture() Architecture {
	a := Architecture{Features: m.features, LogStd: m.logStd}
	for _, c := range m.conv {
		a.Conv = append(a.Conv, ConvLayout{InH: c.inH, InW: c.inW, InC: c.inC, OutH: c.outH, OutW: c.outW, OutC: c.outC,
			Kernel: c.k, Stride: c.stride, Padding: c.pad, W: c.w, B: c.b})
	}
	dense := func(ls []layer) []DenseLayer {
		var out []DenseLayer
		for _, l := range ls {
			out = append(out, DenseLayer{In: l.in, Out: l.out, W: l.w, B: l.b, Activated: l.act})
		}
		return out
	}
	a.Trunk, a.Pi, a.V = dense(m.trunk), dense(m.pi), dense(m.v)
	return a
}
