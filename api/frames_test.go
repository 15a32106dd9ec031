package api

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/vmihailenco/msgpack/v5"
)

func frames(shape []int, data ...float32) Frames {
	return NewFrames(Tensor[float32]{Shape: shape, Data: data})
}

// Binary observations travel packed, others as tensors; both come back
// value for value, into fresh frames and into reused ones.
func TestFramesRoundTrip(t *testing.T) {
	binary := make([]float32, 10*10*10)
	for i := range binary {
		if i%7 == 0 || i%13 == 5 {
			binary[i] = 1
		}
	}
	cases := []struct {
		name   string
		f      Frames
		packed bool
		// maxBytes bounds the encoding: packed is about n/8.
		maxBytes int
	}{
		{"minatar frame", frames([]int{10, 10, 10}, binary...), true, 1000/8 + 16},
		{"all zeros", frames([]int{3, 3}, make([]float32, 9)...), true, 2 + 16},
		{"one value, not a byte's worth", frames([]int{1}, 1), true, 1 + 16},
		{"nine values", frames([]int{9}, 1, 0, 0, 0, 0, 0, 0, 1, 1), true, 2 + 16},
		{"cartpole", frames([]int{4}, 0.1, -0.2, 1, 0), false, 4*4 + 40},
		{"a two among ones", frames([]int{3}, 1, 2, 1), false, 3*4 + 40},
		{"NaN", frames([]int{2}, float32(math.NaN()), 0), false, 2*4 + 40},
		{"empty", frames([]int{0}), true, 16},
		{"zero", Frames{}, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := msgpack.Marshal(&tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > tc.maxBytes {
				t.Errorf("encoded in %d bytes, want at most %d", len(b), tc.maxBytes)
			}
			if packed := len(b) > 0 && b[0] == 0x92; packed != tc.packed {
				t.Errorf("packed %v, want %v (% x)", packed, tc.packed, b[:min(len(b), 8)])
			}
			reused := frames([]int{1, 2, 3, 4}, make([]float32, 2000)...)
			for _, dst := range []*Frames{{}, &reused} {
				if err := msgpack.Unmarshal(b, dst); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(dst.Shape, dst.Data) != fmt.Sprint(tc.f.Shape, tc.f.Data) {
					t.Fatalf("decoded %v %v, want %v %v", dst.Shape, dst.Data, tc.f.Shape, tc.f.Data)
				}
				if dst.Binary() != tc.packed {
					t.Errorf("decoded frames say binary %v, want %v", dst.Binary(), tc.packed)
				}
			}
		})
	}
}

// TestFramesBinary: frames say they are binary only while the last
// decode into them read the packed form, by either of a sample batch's
// decoders, so that a batch decoded into one that was packed does not
// keep its word.
func TestFramesBinary(t *testing.T) {
	packed, err := msgpack.Marshal(frames([]int{9}, 1, 0, 0, 0, 0, 0, 0, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	tensor, err := msgpack.Marshal(frames([]int{2}, float32(math.NaN()), 1))
	if err != nil {
		t.Fatal(err)
	}
	if frames([]int{1}, 1).Binary() {
		t.Error("NewFrames of ones says binary")
	}
	var f Frames
	for i, step := range []struct {
		wire []byte
		want bool
	}{{packed, true}, {tensor, false}, {packed, true}, {[]byte{0x92, 0x91, 0x09, 0xc4, 0x05}, false}} {
		err := msgpack.Unmarshal(step.wire, &f)
		if f.Binary() != step.want {
			t.Errorf("decode %d (err %v): binary %v, want %v", i, err, f.Binary(), step.want)
		}
	}
	batch := func(obs ...float32) []byte {
		n := len(obs)
		b, err := msgpack.Marshal(&SampleBatch{Obs: frames([]int{n, 1}, obs...), Actions: NewTensor[int32](n),
			Rewards: NewTensor[float32](n), Terminated: NewTensor[uint8](n), Truncated: NewTensor[uint8](n)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var b SampleBatch
	if err := msgpack.Unmarshal(batch(1, 0, 1), &b); err != nil || !b.Obs.Binary() {
		t.Fatalf("a packed batch: binary %v (%v)", b.Obs.Binary(), err)
	}
	if _, ok := b.DecodeFast(batch(0.5, 2, 3)); !ok || b.Obs.Binary() {
		t.Errorf("a float batch decoded fast into a packed one: binary %v (fast path taken: %v)", b.Obs.Binary(), ok)
	}
	if err := msgpack.Unmarshal(batch(1, 0, 1), &b); err != nil || !b.Obs.Binary() {
		t.Fatalf("a packed batch again: binary %v (%v)", b.Obs.Binary(), err)
	}
	if err := msgpack.Unmarshal(batch(0.5, 2, 3), &b); err != nil || b.Obs.Binary() {
		t.Errorf("a float batch decoded into a packed one: binary %v (%v)", b.Obs.Binary(), err)
	}
}

// Malformed packed frames are errors, and a header claiming more than the
// frame holds allocates nothing near it.
func TestFramesRejectsMalformed(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"three elements", []byte{0x93, 0x91, 0x01, 0xc4, 0x01, 0x01, 0x00}, "want [shape, bits]"},
		{"rank 0", []byte{0x92, 0x90, 0xc4, 0x00}, "shape rank 0"},
		{"negative dimension", []byte{0x92, 0x91, 0xff, 0xc4, 0x00}, "out of range"},
		{"product overflows", []byte{0x92, 0x92, 0xce, 0x7f, 0xff, 0xff, 0xff, 0xce, 0x7f, 0xff, 0xff, 0xff, 0xc4, 0x00}, "out of range"},
		{"too few bits", []byte{0x92, 0x91, 0x10, 0xc4, 0x01, 0xff}, "want 2 bytes of bits, have 1"},
		{"shape not an array", []byte{0x92, 0x01, 0xc4, 0x01, 0x01}, "reading shape"},
		// 2^31-1 values, 256 MiB of bits claimed, 3 present.
		{"hostile length", []byte{0x92, 0x91, 0xce, 0x7f, 0xff, 0xff, 0xff, 0xc6, 0x10, 0x00, 0x00, 0x00, 1, 2, 3}, "reading bits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f Frames
			var err error
			mptest.BoundedAlloc(t, tc.in, func() { err = msgpack.Unmarshal(tc.in, &f) })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			}
			if !f.IsZero() {
				t.Errorf("frames left %v", f.Shape)
			}
		})
	}
}

// A sample batch's binary observations travel packed (a batch of 64
// MinAtar Breakout steps shrinks from 100 KB of float32 to about 3 KB),
// any other as float32, and both come back value for value.
func TestSampleBatchObsPacked(t *testing.T) {
	batch := func(obs []float32) *SampleBatch {
		n := len(obs) / 400
		b := &SampleBatch{Policy: "p", Obs: NewFrames(Tensor[float32]{Shape: []int{n, 10, 10, 4}, Data: obs}),
			Actions: NewTensor[int32](n), Rewards: NewTensor[float32](n), Terminated: NewTensor[uint8](n), Truncated: NewTensor[uint8](n)}
		return b
	}
	obs := make([]float32, 64*400)
	for i := range obs {
		obs[i] = float32(i % 11 / 10)
	}
	packed, err := msgpack.Marshal(batch(obs))
	if err != nil {
		t.Fatal(err)
	}
	obs[7] = 0.5
	float, err := msgpack.Marshal(batch(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("64 MinAtar steps: %d bytes packed, %d as float32", len(packed), len(float))
	if len(packed)*20 > len(float) {
		t.Errorf("packed %d bytes, float32 %d: want a 20-fold saving at least", len(packed), len(float))
	}
	for _, c := range []struct {
		wire []byte
		half bool
	}{{packed, false}, {float, true}} {
		var back SampleBatch
		if err := msgpack.Unmarshal(c.wire, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatal(err)
		}
		obs[7] = 0
		if c.half {
			obs[7] = 0.5
		}
		if fmt.Sprint(back.Obs.Shape, back.Obs.Data) != fmt.Sprint([]int{64, 10, 10, 4}, obs) {
			t.Errorf("observations came back other than they went")
		}
	}
}

// BenchmarkFramesDecode decodes one packed MinAtar Breakout frame
// (10x10x4 binary values) into reused storage, as a DQN trainer decodes
// every sampled transition's two.
func BenchmarkFramesDecode(b *testing.B) {
	obs := make([]float32, 400)
	for i := range obs {
		obs[i] = float32(i % 7 / 6)
	}
	wire, err := msgpack.Marshal(frames([]int{10, 10, 4}, obs...))
	if err != nil {
		b.Fatal(err)
	}
	var f Frames
	b.SetBytes(int64(4 * len(obs)))
	for b.Loop() {
		if err := msgpack.Unmarshal(wire, &f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFramesEncode encodes the observations of a sample batch of 64
// MinAtar Breakout steps (64x10x10x4 binary values), packed, as an actor
// does for every batch it sends.
func BenchmarkFramesEncode(b *testing.B) {
	obs := make([]float32, 64*400)
	for i := range obs {
		obs[i] = float32(i % 7 / 6)
	}
	f := frames([]int{64, 10, 10, 4}, obs...)
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	b.SetBytes(int64(4 * len(obs)))
	for b.Loop() {
		buf.Reset()
		if err := e.Encode(&f); err != nil {
			b.Fatal(err)
		}
	}
}
