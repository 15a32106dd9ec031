package api

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/vmihailenco/msgpack/v5"
)

func roundTrip[T Numeric](t *testing.T, in Tensor[T]) {
	t.Helper()
	b, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatalf("Marshal(%v): %v", in, err)
	}
	var out Tensor[T]
	if err := msgpack.Unmarshal(b, &out); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
}

func mustTensor[T Numeric](t *testing.T, data []T, shape ...int) Tensor[T] {
	t.Helper()
	x, err := FromSlice(data, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestTensorRoundTrip(t *testing.T) {
	// Run every case on both the zero-copy path and the portable
	// encoding/binary path used on big-endian hosts.
	for _, little := range []bool{true, false} {
		name := "portable"
		if little {
			name = "native"
		}
		t.Run(name, func(t *testing.T) {
			if !hostLittleEndian && little {
				t.Skip("big-endian host")
			}
			defer func(v bool) { hostLittleEndian = v }(hostLittleEndian)
			hostLittleEndian = little

			roundTrip(t, mustTensor(t, []float32{1.5, -2, float32(math.Inf(1)), math.MaxFloat32, 0}, 5))
			roundTrip(t, mustTensor(t, []float64{math.Pi, -math.SmallestNonzeroFloat64}, 1, 2))
			roundTrip(t, mustTensor(t, []int32{math.MinInt32, -1, 0, math.MaxInt32}, 2, 2))
			roundTrip(t, mustTensor(t, []int64{math.MinInt64, math.MaxInt64, 7}, 3, 1))
			roundTrip(t, mustTensor(t, []uint8{0, 1, 255}, 3))
			roundTrip(t, mustTensor(t, []float32{42}))                        // 1-D of one
			roundTrip(t, Tensor[float32]{Shape: []int{}, Data: []float32{7}}) // scalar
			roundTrip(t, Tensor[int32]{Shape: []int{0, 3}, Data: []int32{}})
			roundTrip(t, Tensor[float64]{}) // absent
		})
	}
}

// TestTensorWireBytes pins the wire format against bytes written by hand, so
// an encoder change that round-trips with itself but breaks Python fails.
func TestTensorWireBytes(t *testing.T) {
	got, err := msgpack.Marshal(mustTensor(t, []float32{1, -2}, 2))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0x83, // map of 3
		0xa5, 'd', 't', 'y', 'p', 'e', 0xa7, 'f', 'l', 'o', 'a', 't', '3', '2',
		0xa5, 's', 'h', 'a', 'p', 'e', 0x91, 0x02, // [2]
		0xa4, 'd', 'a', 't', 'a', 0xc4, 0x08, // bin8 of 8 bytes
		0x00, 0x00, 0x80, 0x3f, // 1.0f little-endian
		0x00, 0x00, 0x00, 0xc0, // -2.0f
	}
	if !bytes.Equal(got, want) {
		t.Errorf("wire bytes\n got % x\nwant % x", got, want)
	}
	if b, _ := msgpack.Marshal(Tensor[float32]{}); !bytes.Equal(b, []byte{0xc0}) {
		t.Errorf("zero tensor encodes as % x, want c0 (nil)", b)
	}
}

func TestTensorDecodeReusesBuffers(t *testing.T) {
	b, _ := msgpack.Marshal(mustTensor(t, []float32{1, 2, 3, 4}, 2, 2))
	dst := Tensor[float32]{Shape: make([]int, 0, 4), Data: make([]float32, 0, 16)}
	data := &dst.Data[:1][0]
	if err := msgpack.Unmarshal(b, &dst); err != nil {
		t.Fatal(err)
	}
	if &dst.Data[0] != data {
		t.Error("decoding reallocated Data despite enough capacity")
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := msgpack.Unmarshal(b, &dst); err != nil {
			t.Fatal(err)
		}
	}); allocs > 2 { // the decoder itself; none for the tensor
		t.Errorf("decoding into a reused tensor: %v allocs, want <= 2", allocs)
	}
}

// enc builds msgpack bytes by hand, for inputs the encoder would never
// write.
func enc(f func(e *msgpack.Encoder)) []byte {
	var buf bytes.Buffer
	f(msgpack.NewEncoder(&buf))
	return buf.Bytes()
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// tensorMap writes a map whose entries are written by fns, in order.
func tensorMap(fns ...func(e *msgpack.Encoder)) []byte {
	return enc(func(e *msgpack.Encoder) {
		_ = e.EncodeMapLen(len(fns))
		for _, f := range fns {
			f(e)
		}
	})
}

func kv(key string, v any) func(e *msgpack.Encoder) {
	return func(e *msgpack.Encoder) {
		_ = e.EncodeString(key)
		_ = e.Encode(v)
	}
}

func TestTensorDecodeHostile(t *testing.T) {
	dt := kv("dtype", "float32")
	okData := kv("data", f32bytes(1, 2))
	valid, err := msgpack.Marshal(mustTensor(t, []float32{1, 2, 3, 4}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"empty input", nil, "EOF"},
		{"not a map", enc(func(e *msgpack.Encoder) { _ = e.EncodeInt(3) }), "map length"},
		{"wrong dtype", tensorMap(kv("dtype", "float64"), kv("shape", []int{1}), kv("data", make([]byte, 8))), `dtype "float64"`},
		{"unknown dtype", tensorMap(kv("dtype", "complex64"), kv("shape", []int{2}), okData), `dtype "complex64"`},
		{"very long dtype", tensorMap(kv("dtype", strings.Repeat("x", 1000)), kv("shape", []int{2}), okData), "reading dtype: string of 1000 bytes"},
		{"dtype not a string", tensorMap(kv("dtype", 4), kv("shape", []int{2}), okData), "reading dtype"},
		{"truncated data", valid[:len(valid)-6], "EOF"},
		{"data shorter than header", tensorMap(dt, kv("shape", []int{2}), func(e *msgpack.Encoder) {
			_ = e.EncodeString("data")
			_ = e.EncodeBytesLen(8)
			_, _ = e.Writer().Write([]byte{1, 2, 3})
		}), "EOF"},
		{"negative dimension", tensorMap(dt, kv("shape", []int{-1}), okData), "out of range"},
		{"shape product mismatch", tensorMap(dt, kv("shape", []int{2, 3}), okData), "needs 24 bytes"},
		{"shape after data mismatch", tensorMap(dt, okData, kv("shape", []int{3})), "needs 3 elements"},
		{"shape overflow", tensorMap(dt, kv("shape", []int{math.MaxInt32, math.MaxInt32, math.MaxInt32}), okData), "overflows"},
		{"dimension too large", tensorMap(dt, kv("shape", []int64{1 << 40}), okData), "out of range"},
		{"uint64 dimension", tensorMap(dt, kv("shape", []uint64{math.MaxUint64}), okData), "out of range"},
		{"rank too large", tensorMap(dt, kv("shape", make([]int, MaxRank+1)), okData), "rank"},
		{"nil dimension", tensorMap(dt, kv("shape", []any{nil}), okData), "nil dimension"},
		{"float dimension", tensorMap(dt, kv("shape", []any{2.0}), okData), "reading shape"},
		{"nil shape", tensorMap(dt, kv("shape", nil), okData), "shape is nil"},
		{"shape not an array", tensorMap(dt, kv("shape", "2"), okData), "reading shape"},
		{"nil data", tensorMap(dt, kv("shape", []int{0}), kv("data", nil)), "data is nil"},
		{"data not a multiple of item size", tensorMap(dt, kv("shape", []int{2}), kv("data", make([]byte, 7))), "multiple"},
		{"data claims 4 GiB", tensorMap(dt, func(e *msgpack.Encoder) {
			_ = e.EncodeString("data")
			_ = e.EncodeBytesLen(math.MaxUint32 - 3)
			_, _ = e.Writer().Write(make([]byte, 100))
		}), "EOF"},
		{"unknown key", tensorMap(kv("order", "C"), dt, kv("shape", []int{2}), okData), `unknown key "order"`},
		{"long key", tensorMap(kv(strings.Repeat("k", 100), 1), dt, kv("shape", []int{2}), okData), "reading key: string of 100 bytes"},
		{"missing dtype", tensorMap(kv("shape", []int{2}), okData), `missing key "dtype"`},
		{"missing shape", tensorMap(dt, okData), `missing key "shape"`},
		{"missing data", tensorMap(dt, kv("shape", []int{2})), `missing key "data"`},
		{"duplicate dtype", tensorMap(dt, dt, kv("shape", []int{2}), okData), "duplicate"},
		{"duplicate data", tensorMap(dt, kv("shape", []int{2}), okData, okData), "duplicate"},
		{"key not a string", tensorMap(kv("dtype", "float32"), func(e *msgpack.Encoder) { _ = e.EncodeInt(1); _ = e.EncodeInt(2) }), "reading key"},
		{"map claims many keys", enc(func(e *msgpack.Encoder) { _ = e.EncodeMapLen(math.MaxUint32) }), "EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := mustTensor(t, []float32{9, 9})
			err := msgpack.Unmarshal(tc.in, &dst)
			if err == nil {
				t.Fatalf("decoded %+v, want an error containing %q", dst, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if !dst.IsZero() && tc.in != nil {
				t.Errorf("after an error the tensor is %+v, want zero", dst)
			}
		})
	}
}

func TestTensorDecodeLenient(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want Tensor[uint8]
	}{
		{"keys in any order", tensorMap(kv("data", []byte{1, 0}), kv("shape", []int{2}), kv("dtype", "uint8")),
			Tensor[uint8]{Shape: []int{2}, Data: []uint8{1, 0}}},
		{"numpy bool", tensorMap(kv("dtype", "bool"), kv("shape", []int{1, 2}), kv("data", []byte{0, 1})),
			Tensor[uint8]{Shape: []int{1, 2}, Data: []uint8{0, 1}}},
		{"data as str", tensorMap(kv("dtype", "uint8"), kv("shape", []int{2}), kv("data", "ab")),
			Tensor[uint8]{Shape: []int{2}, Data: []uint8{'a', 'b'}}},
		{"nil", []byte{0xc0}, Tensor[uint8]{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got Tensor[uint8]
			if err := msgpack.Unmarshal(tc.in, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTensorEncodeInvalid(t *testing.T) {
	for _, tc := range []Tensor[float32]{
		{Shape: []int{3}, Data: []float32{1}},
		{Shape: []int{-1}},
		{Data: []float32{1}}, // data without shape
	} {
		if _, err := msgpack.Marshal(tc); err == nil {
			t.Errorf("Marshal(%+v) succeeded, want an error", tc)
		}
	}
}

func TestTensorHelpers(t *testing.T) {
	x := NewTensor[int32](2, 3)
	if x.Len() != 6 || !reflect.DeepEqual(x.Shape, []int{2, 3}) {
		t.Fatalf("NewTensor(2, 3) = %+v", x)
	}
	copy(x.Data, []int32{0, 1, 2, 3, 4, 5})
	if got := x.Row(1); !reflect.DeepEqual(got, []int32{3, 4, 5}) {
		t.Errorf("Row(1) = %v", got)
	}
	for _, i := range []int{-1, 2} {
		if got := x.Row(i); got != nil {
			t.Errorf("Row(%d) = %v, want nil", i, got)
		}
	}
	if got := NewTensor[int32](6).Row(0); got != nil {
		t.Errorf("Row of a 1-D tensor = %v, want nil", got)
	}
	if bad := NewTensor[float32](2, -1); bad.Validate() == nil {
		t.Errorf("NewTensor(2, -1) = %+v validates", bad)
	}
	if s := NewTensor[float32](); len(s.Data) != 1 || s.Shape == nil {
		t.Errorf("NewTensor() = %+v, want a scalar", s)
	}

	if _, err := FromSlice([]float32{1, 2, 3}, 2, 2); err == nil {
		t.Error("FromSlice with a mismatched shape succeeded")
	}
	shape := []int{3}
	y, err := FromSlice([]float32{1, 2, 3}, shape...)
	if err != nil {
		t.Fatal(err)
	}
	shape[0] = 5
	if y.Shape[0] != 3 {
		t.Error("FromSlice kept the caller's shape slice")
	}

	buf := make([]float32, 0, 100)
	z := Tensor[float32]{Data: buf}
	if err := z.Resize(4, 5); err != nil {
		t.Fatal(err)
	}
	if z.Len() != 20 || &z.Data[0] != &buf[:1][0] || z.Validate() != nil {
		t.Errorf("Resize(4, 5) = %+v, want 20 elements in the old buffer", z)
	}
	if err := z.Resize(-2); err == nil {
		t.Error("Resize(-2) succeeded")
	}
}

func TestPortableCodec(t *testing.T) {
	in := []int64{1, -2, math.MaxInt64}
	b := appendLittleEndian(nil, in)
	if !bytes.Equal(b, asBytes(in)) && hostLittleEndian {
		t.Errorf("portable bytes % x differ from native % x", b, asBytes(in))
	}
	out := make([]int64, 3)
	decodeLittleEndian(out, b)
	if !reflect.DeepEqual(in, out) {
		t.Errorf("decodeLittleEndian = %v, want %v", out, in)
	}
}

func FuzzTensorDecode(f *testing.F) {
	for _, seed := range [][]byte{
		mustEncode(f, Tensor[float32]{Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}),
		mustEncode(f, Tensor[uint8]{Shape: []int{3}, Data: []uint8{1, 2, 3}}),
		mustEncode(f, Tensor[float32]{Shape: []int{}, Data: []float32{1}}),
		tensorMap(kv("dtype", "float32"), kv("shape", []int{-1}), kv("data", []byte{})),
		tensorMap(kv("data", f32bytes(1)), kv("shape", []int{1}), kv("dtype", "float32")),
		tensorMap(kv("dtype", "float32"), kv("shape", []int{math.MaxInt32, math.MaxInt32}), kv("data", []byte{})),
		{0xc0},
		{0x83, 0xc6, 0xff, 0xff, 0xff, 0xff},
	} {
		f.Add(seed)
	}
	mptest.Seed(f, mptest.Values(), mptest.InMaps("dtype", "shape", "data"))
	f.Fuzz(func(t *testing.T, in []byte) {
		// The tensor decoder reads data a chunk at a time, so that even
		// input that msgpackcheck has not seen costs at most a chunk
		// beyond its size, never what a header claims. AllocSlack, as in
		// mptest.BoundedAlloc, covers the decoder's own small objects
		// (under -race a 12-byte input went 3 KB past 2 chunks).
		limit := uint64(mptest.AllocPerByte*len(in) + mptest.AllocSlack + 2*readChunk)
		for name, decode := range map[string]func(*testing.T, []byte){
			"float32": fuzzOne[float32], "uint8": fuzzOne[uint8], "int64": fuzzOne[int64],
		} {
			if n := mptest.Allocated(func() { decode(t, in) }); n > limit {
				t.Fatalf("decoding % .32x into Tensor[%s] allocated %d bytes, want at most %d", in, name, n, limit)
			}
		}
	})
}

func mustEncode(f *testing.F, v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// fuzzOne checks that decoding never panics and that whatever decodes is a
// valid tensor that survives a round trip.
func fuzzOne[T Numeric](t *testing.T, in []byte) {
	var x Tensor[T]
	if err := msgpack.Unmarshal(in, &x); err != nil {
		return
	}
	if err := x.Validate(); err != nil {
		t.Fatalf("decoded an invalid tensor %+v: %v", x, err)
	}
	b, err := msgpack.Marshal(x)
	if err != nil {
		t.Fatalf("re-encoding %+v: %v", x, err)
	}
	var y Tensor[T]
	if err := msgpack.Unmarshal(b, &y); err != nil {
		t.Fatalf("decoding the re-encoding: %v", err)
	}
	if !reflect.DeepEqual(asBytes(x.Data), asBytes(y.Data)) || !reflect.DeepEqual(x.Shape, y.Shape) {
		t.Fatalf("round trip changed %+v into %+v", x, y)
	}
}

// TestTensorDataAligned checks that large tensors are laid out with their
// data 8-byte aligned in the encoder's buffer whatever precedes them, and
// that the padding is plain msgpack any decoder reads.
func TestTensorDataAligned(t *testing.T) {
	x := NewTensor[float32](2, 300) // 2400 bytes: past alignMin
	for i := range x.Data {
		x.Data[i] = float32(i)
	}
	for prefix := range 16 {
		var buf bytes.Buffer
		buf.Write(make([]byte, prefix))
		e := msgpack.NewEncoder(&buf)
		if err := e.Encode(x); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		want := asBytes(x.Data)
		off := bytes.Index(b, want)
		if off < 0 || off%8 != 0 || len(b)-off != len(want) {
			t.Errorf("prefix %d: data at offset %d, want a multiple of 8 at the end", prefix, off)
		}
		var y Tensor[float32]
		if err := msgpack.Unmarshal(b[prefix:], &y); err != nil || !reflect.DeepEqual(x, y) {
			t.Errorf("prefix %d: decoding: %v", prefix, err)
		}
		// A generic decoder (as Python's would) sees the documented map.
		var m map[string]any
		if err := msgpack.Unmarshal(b[prefix:], &m); err != nil {
			t.Fatalf("prefix %d: generic decode: %v", prefix, err)
		}
		if m["dtype"] != "float32" || fmt.Sprint(m["shape"]) != "[2 300]" || !bytes.Equal(m["data"].([]byte), want) {
			t.Errorf("prefix %d: generic decode gave dtype=%v shape=%#v", prefix, m["dtype"], m["shape"])
		}
	}
}
