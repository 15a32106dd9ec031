package api

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// fastSeeds are encodings the fast path must take: EncodeMsgpack's, with
// the padding the encoder adds for alignment (large data), and nil.
func fastSeeds(t testing.TB) [][]byte {
	t.Helper()
	var seeds [][]byte
	add := func(v any) {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	add(vec([]int64{1, 2, 3}))
	add(Tensor[float32]{Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}})
	add(Tensor[float32]{Shape: []int{0, 4}, Data: []float32{}})
	add(Tensor[float32]{Shape: []int{}, Data: []float32{7}})
	add(Tensor[float32]{Shape: []int{2}, Data: []float32{float32(math.NaN()), float32(math.Inf(-1))}})
	add(Tensor[float32]{Shape: []int{300, 200}, Data: make([]float32, 60000)}) // uint16 dims, bin32, padded keys
	add(Tensor[uint8]{Shape: []int{70000}, Data: make([]uint8, 70000)})        // a uint32 dimension
	add(Tensor[int64]{})
	add(Inference{Actions: vec([]int32{0, 1}), LogProbs: vec([]float32{-0.5, -0.7}), Values: vec([]float32{1, 2}), Version: 12})
	add(Inference{ContActions: Tensor[float32]{Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}, Version: -3})
	return seeds
}

// framesSeeds are frames as EncodeMsgpack writes them, packed (binary
// values) and not.
func framesSeeds(t testing.TB) [][]byte {
	binary := make([]float32, 400)
	for i := range binary {
		binary[i] = float32(i % 3 % 2)
	}
	var seeds [][]byte
	for _, f := range []Frames{
		NewFrames(Tensor[float32]{Shape: []int{10, 10, 4}, Data: binary}),
		NewFrames(Tensor[float32]{Shape: []int{3}, Data: []float32{1, 0, 1}}),        // a partial byte
		NewFrames(Tensor[float32]{Shape: []int{2, 300}, Data: make([]float32, 600)}), // a uint16 dimension
		NewFrames(Tensor[float32]{Shape: []int{0, 4}, Data: []float32{}}),
		NewFrames(Tensor[float32]{Shape: []int{2}, Data: []float32{0.5, 1}}), // not binary: a tensor
	} {
		seeds = append(seeds, marshal(t, f))
	}
	return seeds
}

// checkFastFrames decodes b both ways, into used frames, when the fast
// path takes it, and fails t where they differ; it reports whether the
// fast path took it.
func checkFastFrames(t testing.TB, b []byte) bool {
	t.Helper()
	used := func() Frames { return NewFrames(Tensor[float32]{Shape: []int{1, 2}, Data: []float32{7, 7}}) }
	return checkFast(t, b, used, (*Frames).DecodeFast, func(x, y Frames) bool {
		return sameTensor(x.Tensor, y.Tensor) && x.Binary() == y.Binary()
	})
}

// checkFast decodes b into two used values, one by its fast path, and
// where that takes b, the other by msgpack, and fails t where they
// differ; it reports whether the fast path took b.
func checkFast[V any](t testing.TB, b []byte, used func() V, decodeFast func(*V, []byte) ([]byte, bool), same func(x, y V) bool) bool {
	t.Helper()
	fast, gen := used(), used()
	rest, ok := decodeFast(&fast, b)
	if !ok {
		return false
	}
	if err := msgpack.Unmarshal(b[:len(b)-len(rest)], &gen); err != nil {
		t.Fatalf("fast path took % x (%d bytes), DecodeMsgpack says %v", b[:min(len(b), 48)], len(b), err)
	}
	if !same(fast, gen) {
		t.Fatalf("% x (%d bytes): fast %+v, DecodeMsgpack %+v", b[:min(len(b), 48)], len(b), fast, gen)
	}
	return true
}

// Frames' fast path takes what EncodeMsgpack writes, packed or not.
func TestFramesDecodeFast(t *testing.T) {
	for i, b := range framesSeeds(t) {
		if !checkFastFrames(t, b) {
			t.Errorf("seed %d: the fast path did not take the encoder's % x", i, b[:min(len(b), 40)])
		}
	}
	// Packed frames written by another encoder (the shape as a uint8 and
	// an int8): what the fast path takes it decodes alike.
	checkFastFrames(t, []byte{0x92, 0x92, 0xcc, 0x02, 0xd0, 0x01, 0xc4, 0x01, 0x03})
}

// The fast path takes what EncodeMsgpack writes, and what it takes it
// decodes as DecodeMsgpack does, into used values too.
func TestDecodeFastTakesTheEncodersForm(t *testing.T) {
	for i, b := range fastSeeds(t) {
		var took bool
		if i < 8 {
			took = checkFastTensor[float32](t, b)
			took = checkFastTensor[int64](t, b) || took
			took = checkFastTensor[uint8](t, b) || took
		} else {
			took = checkFastInference(t, b)
		}
		if !took {
			t.Errorf("seed %d: the fast path did not take the encoder's % x", i, b[:min(len(b), 40)])
		}
	}
	// Other valid forms go the general way: a map in another key order, a
	// version written as a small integer, an extra key.
	for _, b := range [][]byte{
		marshal(t, map[string]any{"shape": []int{1}, "dtype": "float32", "data": []byte{0, 0, 0, 0}}),
		marshal(t, map[string]any{"actions": nil, "cont_actions": nil, "logprobs": nil, "values": nil, "version": 3}),
	} {
		var f Tensor[float32]
		var inf Inference
		if _, ok := f.DecodeFast(b); ok {
			t.Errorf("DecodeFast took % x", b)
		}
		if _, ok := inf.DecodeFast(b); ok {
			t.Errorf("Inference.DecodeFast took % x", b)
		}
	}
}

// checkFastTensor decodes b both ways into fresh and into used tensors;
// where the fast path takes b, the general one must give the same tensor
// and have read as many bytes. It reports whether the fast path took it.
func checkFastTensor[T Numeric](t testing.TB, b []byte) bool {
	t.Helper()
	used := func() Tensor[T] { return Tensor[T]{Shape: []int{9, 9, 9}, Data: make([]T, 5, 100)} }
	took := false
	for _, start := range []Tensor[T]{{}, used()} {
		fast, gen := start, start
		fast.Shape, gen.Shape = append([]int(nil), start.Shape...), append([]int(nil), start.Shape...)
		if start.Data != nil {
			fast.Data, gen.Data = make([]T, len(start.Data), cap(start.Data)), make([]T, len(start.Data), cap(start.Data))
		}
		rest, ok := fast.DecodeFast(b)
		if !ok {
			continue
		}
		took = true
		rd := bytes.NewReader(b)
		if err := gen.DecodeMsgpack(msgpack.NewDecoder(rd)); err != nil {
			t.Fatalf("fast path took % x (%d bytes), DecodeMsgpack says %v", b[:min(len(b), 48)], len(b), err)
		}
		if !sameTensor(fast, gen) {
			t.Fatalf("% x (%d bytes): fast %v %d elements, DecodeMsgpack %v %d", b[:min(len(b), 48)], len(b), fast.Shape, len(fast.Data), gen.Shape, len(gen.Data))
		}
		if rd.Len() != len(rest) {
			t.Fatalf("% x (%d bytes): fast left %d bytes, DecodeMsgpack %d", b[:min(len(b), 48)], len(b), len(rest), rd.Len())
		}
	}
	return took
}

func checkFastInference(t testing.TB, b []byte) bool {
	t.Helper()
	used := func() Inference {
		return Inference{Actions: vec([]int32{5, 5, 5}), ContActions: Tensor[float32]{Shape: []int{1, 1}, Data: []float32{9}},
			LogProbs: vec([]float32{-1}), Values: vec([]float32{3, 3}), Version: 99}
	}
	return checkFast(t, b, used, (*Inference).DecodeFast, func(x, y Inference) bool {
		return sameTensor(x.Actions, y.Actions) && sameTensor(x.ContActions, y.ContActions) &&
			sameTensor(x.LogProbs, y.LogProbs) && sameTensor(x.Values, y.Values) && x.Version == y.Version
	})
}

// FuzzDecodeFast: whatever the fast path takes, the general decoder
// decodes to the same value.
func FuzzDecodeFast(f *testing.F) {
	for _, b := range append(fastSeeds(f), framesSeeds(f)...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastTensor[float32](t, b)
		checkFastTensor[int64](t, b)
		checkFastTensor[uint8](t, b)
		checkFastTensor[int32](t, b)
		checkFastInference(t, b)
		checkFastFrames(t, b)
	})
}

// sameTensor compares bit for bit (NaNs included), telling nil data from
// empty and a nil shape from an empty one, as DeepEqual would.
func sameTensor[T Numeric](a, b Tensor[T]) bool {
	return slices.Equal(a.Shape, b.Shape) && (a.Shape == nil) == (b.Shape == nil) &&
		(a.Data == nil) == (b.Data == nil) && bytes.Equal(asBytes(a.Data), asBytes(b.Data))
}

// The fast path takes a sample batch as actors encode it, observations
// as a tensor, and decodes it as DecodeMsgpack does, into a used batch
// too; packed frames (MinAtar's) go the general way.
func TestSampleBatchDecodeFast(t *testing.T) {
	batch := func(obs []float32) SampleBatch {
		return SampleBatch{Policy: "default", PolicyVersion: 7,
			Obs:     Frames{Tensor: Tensor[float32]{Shape: []int{2, len(obs) / 2}, Data: obs}},
			Actions: vec([]int32{1, 0}), Rewards: vec([]float32{1, 1}), Terminated: vec([]uint8{0, 1}),
			Truncated: vec([]uint8{0, 0}), LogProbs: vec([]float32{-0.7, -0.6}), Values: vec([]float32{0.5, 0.4}),
			BootstrapValue: 0.25, Episodes: []EpisodeStat{{Return: 2, Length: 2}}, ActorID: "actor/3", AgentID: "0"}
	}
	frame := marshal(t, batch([]float32{0.5, 2, 3, 4}))
	for _, start := range []SampleBatch{{}, batch([]float32{9, 9, 9, 9, 9, 9})} {
		fast, gen := start, start
		rest, ok := fast.DecodeFast(frame)
		if !ok || len(rest) != 0 {
			t.Fatalf("fast path: ok %v, %d bytes left", ok, len(rest))
		}
		if err := msgpack.Unmarshal(frame, &gen); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, gen) {
			t.Errorf("fast %+v, DecodeMsgpack %+v", fast, gen)
		}
	}
	var b SampleBatch
	if _, ok := b.DecodeFast(marshal(t, batch([]float32{0, 1, 1, 0}))); ok {
		t.Error("the fast path took packed frames")
	}
}

// marshal is msgpack.Marshal, failing t on an error.
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	out, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
