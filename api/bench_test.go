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

func BenchmarkTensorEncodeBin4096(b *testing.B) {
	x := benchTensor()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	b.SetBytes(benchElems * 4)
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(x); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTensorDecodeBin4096(b *testing.B) {
	in, err := msgpack.Marshal(benchTensor())
	if err != nil {
		b.Fatal(err)
	}
	r := bytes.NewReader(in)
	dec := msgpack.NewDecoder(r)
	var x Tensor[float32]
	b.SetBytes(benchElems * 4)
	for b.Loop() {
		r.Reset(in)
		dec.Reset(r)
		if err := dec.Decode(&x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloatsAsMsgpackArray4096 encodes the values as a msgpack array,
// the slow way the bin encoding replaces.
func BenchmarkFloatsAsMsgpackArray4096(b *testing.B) {
	x := benchTensor().Data
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	b.SetBytes(benchElems * 4)
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(x); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloatsAsMsgpackArrayDecode4096 decodes such an array, the
// counterpart of BenchmarkTensorDecodeBin4096.
func BenchmarkFloatsAsMsgpackArrayDecode4096(b *testing.B) {
	in, err := msgpack.Marshal(benchTensor().Data)
	if err != nil {
		b.Fatal(err)
	}
	r := bytes.NewReader(in)
	dec := msgpack.NewDecoder(r)
	x := make([]float32, 0, benchElems)
	b.SetBytes(benchElems * 4)
	for b.Loop() {
		r.Reset(in)
		dec.Reset(r)
		if err := dec.Decode(&x); err != nil {
			b.Fatal(err)
		}
	}
}
