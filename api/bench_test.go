package api

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The benchmarks below compare the bin encoding of a Tensor with the naive
// encoding of the same 4096 float32 values as a msgpack array (one float32
// code per element). benchtab pairs them by name.

const benchElems = 4096

func benchTensor() Tensor[float32] {
	x := NewTensor[float32](benchElems)
	for i := range x.Data {
		x.Data[i] = float32(i) * 0.25
	}
	return x
}

// benchEncode encodes v with a reused encoder, as a producer does.
func benchEncode(b *testing.B, v any) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	b.SetBytes(benchElems * 4)
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDecode decodes the encoding of v into into with a reused decoder,
// as a consumer does.
func benchDecode(b *testing.B, v, into any) {
	in, err := msgpack.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	r := bytes.NewReader(in)
	dec := msgpack.NewDecoder(r)
	b.SetBytes(benchElems * 4)
	for b.Loop() {
		r.Reset(in)
		dec.Reset(r)
		if err := dec.Decode(into); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTensorEncodeBin4096(b *testing.B) { benchEncode(b, benchTensor()) }

func BenchmarkTensorDecodeBin4096(b *testing.B) {
	var x Tensor[float32]
	benchDecode(b, benchTensor(), &x)
}

// BenchmarkFloatsAsMsgpackArray4096 encodes the values as a msgpack array,
// the slow way the bin encoding replaces.
func BenchmarkFloatsAsMsgpackArray4096(b *testing.B) { benchEncode(b, benchTensor().Data) }

// BenchmarkFloatsAsMsgpackArrayDecode4096 decodes such an array, the
// counterpart of BenchmarkTensorDecodeBin4096.
func BenchmarkFloatsAsMsgpackArrayDecode4096(b *testing.B) {
	x := make([]float32, 0, benchElems)
	benchDecode(b, benchTensor().Data, &x)
}
