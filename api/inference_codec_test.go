package api

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// reflectedInference has Inference's fields and tags and no codec of its
// own: what msgpack's reflection writes and reads for the struct, which
// the hand-written codec must match.
type reflectedInference struct {
	Actions     Tensor[int32]   `msgpack:"actions"`
	ContActions Tensor[float32] `msgpack:"cont_actions"`
	LogProbs    Tensor[float32] `msgpack:"logprobs"`
	Values      Tensor[float32] `msgpack:"values"`
	Version     int64           `msgpack:"version"`
}

// vec is a 1-D tensor of data.
func vec[T Numeric](data []T) Tensor[T] { return Tensor[T]{Shape: []int{len(data)}, Data: data} }

func inferenceCases() map[string]Inference {
	return map[string]Inference{
		"discrete": {Actions: vec([]int32{1, 0, 1}), LogProbs: vec([]float32{-0.1, -0.7, -0.2}),
			Values: vec([]float32{1.5, 2, 2.5}), Version: 7},
		"continuous": {ContActions: Tensor[float32]{Shape: []int{2, 2}, Data: []float32{0.1, 0.2, 0.3, 0.4}},
			LogProbs: vec([]float32{-1, -2}), Values: vec([]float32{0, 0}), Version: 1 << 40},
		"no values, negative version": {Actions: vec([]int32{3}), LogProbs: vec([]float32{0}), Version: -3},
		"zero":                        {},
	}
}

func TestInferenceWireMatchesReflection(t *testing.T) {
	for name, inf := range inferenceCases() {
		t.Run(name, func(t *testing.T) {
			got, err := msgpack.Marshal(inf)
			if err != nil {
				t.Fatal(err)
			}
			gotPtr, err := msgpack.Marshal(&inf)
			if err != nil {
				t.Fatal(err)
			}
			want, err := msgpack.Marshal(reflectedInference(inf))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || !bytes.Equal(gotPtr, want) {
				t.Fatalf("encoding differs from reflection:\n got %x\n ptr %x\nwant %x", got, gotPtr, want)
			}
			var back Inference
			if err := msgpack.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			var viaReflection reflectedInference
			if err := msgpack.Unmarshal(want, &viaReflection); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, Inference(viaReflection)) {
				t.Fatalf("decoded %+v, reflection decodes %+v", back, viaReflection)
			}
		})
	}
}

func TestInferenceDecode(t *testing.T) {
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	actions := vec([]int32{1, 2})
	for _, tc := range []struct {
		name    string
		frame   []byte
		want    Inference
		wantErr string
	}{
		{name: "keys in another order, unknown key skipped",
			frame: enc(map[string]any{"version": 4, "extra": []any{1, "x", map[string]any{"y": 2}}, "actions": actions}),
			want:  Inference{Actions: actions, Version: 4}},
		{name: "an unknown key longer than any known one",
			frame: enc(map[string]any{"a_key_longer_than_sixteen_bytes": 1, "version": 5}), want: Inference{Version: 5}},
		{name: "nil", frame: enc(nil), want: Inference{}},
		{name: "not a map", frame: enc([]int{1}), wantErr: "decoding Inference"},
		{name: "a key that is not a string", frame: enc(map[int]int{1: 2}), wantErr: "key"},
		{name: "a bad tensor", frame: enc(map[string]any{"actions": "x"}), wantErr: "actions"},
		{name: "a version that is not an integer", frame: enc(map[string]any{"version": "x"}), wantErr: "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Decoded into a used Inference: an absent key must not leave
			// the last reply's field.
			got := Inference{ContActions: Tensor[float32]{Shape: []int{1, 1}, Data: []float32{9}},
				LogProbs: vec([]float32{-1, -1}), Values: vec([]float32{3, 3}), Version: 99}
			checkDecoded(t, msgpack.Unmarshal(tc.frame, &got), tc.wantErr, got, tc.want)
		})
	}
}

func BenchmarkInferenceCodec(b *testing.B) {
	inf := Inference{Actions: vec(make([]int32, 8)), LogProbs: vec(make([]float32, 8)),
		Values: vec(make([]float32, 8)), Version: 12}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	var out Inference
	dec := msgpack.NewDecoder(nil)
	var rd bytes.Reader
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(&inf); err != nil {
			b.Fatal(err)
		}
		rd.Reset(buf.Bytes())
		dec.Reset(&rd)
		if err := dec.Decode(&out); err != nil {
			b.Fatal(err)
		}
	}
}
