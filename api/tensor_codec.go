package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// hostLittleEndian selects the zero-copy path: on little-endian hosts the
// in-memory bytes of a []T already are the wire bytes. It is a variable, not
// a constant, so tests can force the portable path.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// readChunk bounds how much memory the decoder commits before the bytes that
// justify it have arrived: a hostile header may claim gigabytes of data and
// then stop. Reading grows the destination at most this much at a time.
const readChunk = 1 << 20

// dtypeOf returns T's wire dtype name and item size in bytes.
func dtypeOf[T Numeric]() (string, int) {
	var z T
	switch any(z).(type) {
	case float32:
		return "float32", 4
	case float64:
		return "float64", 8
	case int32:
		return "int32", 4
	case int64:
		return "int64", 8
	default: // uint8, the only type left in Numeric
		return "uint8", 1
	}
}

// dtypeMatches reports whether a wire dtype may be decoded into a Tensor[T].
// NumPy bool arrays are one byte per element holding 0 or 1, so they decode
// into Tensor[uint8]; that lets Python send done flags as np.bool_.
func dtypeMatches[T Numeric](wire []byte) bool {
	name, _ := dtypeOf[T]()
	return string(wire) == name || (name == "uint8" && string(wire) == "bool")
}

// asBytes reinterprets s as its in-memory bytes without copying.
func asBytes[T Numeric](s []T) []byte {
	_, size := dtypeOf[T]()
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*size)
}

// EncodeMsgpack implements [msgpack.CustomEncoder]. The zero tensor encodes
// as nil; any other tensor must pass [Tensor.Validate].
//
// The header is written by hand so that, when the encoder writes into a
// bytes.Buffer (as msgpack.Marshal does), the data of a large tensor starts
// 8-byte aligned within the buffer: copying out of a misaligned source runs
// several times slower on common x86 CPUs (REP MOVSB), and the decoder copies
// every byte. The padding uses longer-than-minimal msgpack string headers
// for the keys, which every msgpack decoder accepts.
func (t Tensor[T]) EncodeMsgpack(e *msgpack.Encoder) error {
	if t.IsZero() {
		return e.EncodeNil()
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("api: encoding tensor: %w", err)
	}
	var data []byte
	if hostLittleEndian {
		data = asBytes(t.Data)
	} else {
		data = appendLittleEndian(nil, t.Data)
	}
	name, _ := dtypeOf[T]()
	var buf [256]byte // enough for MaxRank dimensions of 5 bytes each
	hdr := appendHeader(buf[:0], name, t.Shape, len(data), 0)
	if len(data) >= alignMin {
		pos := 0
		if b, ok := e.Writer().(*bytes.Buffer); ok {
			pos = b.Len()
		}
		if pad := (8 - (pos+len(hdr))%8) % 8; pad != 0 {
			hdr = appendHeader(buf[:0], name, t.Shape, len(data), pad)
		}
	}
	w := e.Writer()
	// Writing the stack buffer through the io.Writer interface would make it
	// escape to the heap; the common bytes.Buffer case is called directly.
	if bb, ok := w.(*bytes.Buffer); ok {
		bb.Write(hdr)
		bb.Write(data)
		return nil
	}
	if _, err := w.Write(bytes.Clone(hdr)); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// alignMin is the data size from which the encoder aligns the data; below
// it the copy is too short for alignment to matter.
const alignMin = 1024

// appendHeader appends the msgpack encoding of a tensor map up to and
// including the bin header of the data, pad (0 to 7) bytes longer than the
// minimal encoding. Dimensions must be in [0, MaxInt32] (Validate ensures).
func appendHeader(b []byte, dtype string, shape []int, nbytes, pad int) []byte {
	b = append(b, 0x83) // fixmap of 3
	b = appendStr(b, "dtype", pad&1)
	b = appendStr(b, dtype, 0)
	b = appendStr(b, "shape", pad&2)
	if len(shape) < 16 {
		b = append(b, 0x90|byte(len(shape))) // fixarray
	} else {
		b = append(b, 0xdc, 0, byte(len(shape))) // array16
	}
	for _, d := range shape {
		switch {
		case d < 128:
			b = append(b, byte(d)) // positive fixint
		case d < 1<<8:
			b = append(b, 0xcc, byte(d)) // uint8
		case d < 1<<16:
			b = append(b, 0xcd) // uint16
			b = binary.BigEndian.AppendUint16(b, uint16(d))
		default:
			b = append(b, 0xce) // uint32
			b = binary.BigEndian.AppendUint32(b, uint32(d))
		}
	}
	b = appendStr(b, "data", pad&4)
	switch {
	case nbytes < 1<<8:
		b = append(b, 0xc4, byte(nbytes)) // bin8
	case nbytes < 1<<16:
		b = append(b, 0xc5) // bin16
		b = binary.BigEndian.AppendUint16(b, uint16(nbytes))
	default:
		b = append(b, 0xc6) // bin32
		b = binary.BigEndian.AppendUint32(b, uint32(nbytes))
	}
	return b
}

// appendStr appends a short string (under 32 bytes) as a msgpack fixstr,
// or, to add extra bytes of padding (1, 2 or 4), as a str8, str16 or str32.
func appendStr(b []byte, s string, extra int) []byte {
	switch extra {
	case 1:
		b = append(b, 0xd9, byte(len(s)))
	case 2:
		b = append(b, 0xda, 0, byte(len(s)))
	case 4:
		b = append(b, 0xdb, 0, 0, 0, byte(len(s)))
	default:
		b = append(b, 0xa0|byte(len(s)))
	}
	return append(b, s...)
}

// DecodeMsgpack implements [msgpack.CustomDecoder]. Keys may come in any
// order; unknown keys are an error. t.Shape and t.Data are reused when
// their capacity suffices (as encoding/json reuses slices), so decoding into
// the same tensor repeatedly does not allocate. On error t is left zero.
func (t *Tensor[T]) DecodeMsgpack(d *msgpack.Decoder) error {
	if err := t.decode(d); err != nil {
		*t = Tensor[T]{}
		name, _ := dtypeOf[T]()
		return fmt.Errorf("api: decoding Tensor[%s]: %w", name, err)
	}
	return nil
}

// scratch is where a decoder reads keys, dtypes, short strings and packed
// bits. A buffer on the stack would escape to the heap (msgpack reads
// through an io.Reader), one allocation per tensor decoded; a pooled one
// costs none.
type scratch [packChunk]byte

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch  { return scratchPool.Get().(*scratch) }
func putScratch(s *scratch) { scratchPool.Put(s) }

func (t *Tensor[T]) decode(d *msgpack.Decoder) error {
	s := getScratch()
	defer putScratch(s)
	buf := s[:16]
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	if c == msgpcode.Nil {
		*t = Tensor[T]{}
		return d.DecodeNil()
	}
	nkeys, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	_, size := dtypeOf[T]()
	var (
		haveDtype, haveShape, haveData bool
		want                           = -1 // prod(shape), once the shape is known
	)
	for range nkeys {
		key, err := readShortString(d, buf)
		if err != nil {
			return fmt.Errorf("reading key: %w", err)
		}
		switch string(key) {
		case "dtype":
			if haveDtype {
				return errors.New(`duplicate key "dtype"`)
			}
			haveDtype = true
			v, err := readShortString(d, buf)
			if err != nil {
				return fmt.Errorf("reading dtype: %w", err)
			}
			if !dtypeMatches[T](v) {
				return fmt.Errorf("dtype %q does not match the destination", v)
			}
		case "shape":
			if haveShape {
				return errors.New(`duplicate key "shape"`)
			}
			haveShape = true
			if err := t.decodeShape(d); err != nil {
				return err
			}
			if want, err = numElements(t.Shape, size); err != nil {
				return err
			}
			if haveData && len(t.Data) != want {
				return fmt.Errorf("shape %v needs %d elements, data has %d", t.Shape, want, len(t.Data))
			}
		case "data":
			if haveData {
				return errors.New(`duplicate key "data"`)
			}
			haveData = true
			if err := t.decodeData(d, size, want); err != nil {
				return err
			}
		default:
			// Unknown keys are rejected rather than skipped: msgpack's Skip
			// buffers skipped strings in the decoder's reusable buffer, which
			// a hostile length makes grow, and the format has no optional
			// keys to skip.
			return fmt.Errorf("unknown key %q", key)
		}
	}
	switch {
	case !haveDtype:
		return errors.New(`missing key "dtype"`)
	case !haveShape:
		return errors.New(`missing key "shape"`)
	case !haveData:
		return errors.New(`missing key "data"`)
	}
	return nil
}

// readShortString reads a msgpack str or bin into buf. Longer values cannot
// be any key or dtype the decoder knows, so they are an error, reported
// before anything is read or allocated.
func readShortString(d *msgpack.Decoder, buf []byte) ([]byte, error) {
	return readString(d, buf, false)
}

// readString reads a msgpack str or bin into buf; one longer than buf is an
// error, or with grow is read into a slice of its own (a decoder that skips
// unknown keys).
func readString(d *msgpack.Decoder, buf []byte, grow bool) ([]byte, error) {
	n, err := d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, errors.New("got nil, want a string")
	}
	if n > len(buf) && !grow {
		return nil, fmt.Errorf("string of %d bytes, want at most %d", n, len(buf))
	}
	return readBytes(d, buf, n)
}

// readBytes reads the next n bytes into buf, or into a slice of their own
// (readGrowing) where buf is too short.
func readBytes(d *msgpack.Decoder, buf []byte, n int) ([]byte, error) {
	if n > len(buf) {
		return readGrowing(d, n)
	}
	if err := d.ReadFull(buf[:n]); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// readGrowing reads n bytes into a new slice grown readChunk at a time, so
// that a hostile length commits no more memory than the bytes that came.
func readGrowing(d *msgpack.Decoder, n int) ([]byte, error) {
	var v []byte
	for len(v) < n {
		k := min(n-len(v), readChunk)
		v = slices.Grow(v, k)[:len(v)+k]
		if err := d.ReadFull(v[len(v)-k:]); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (t *Tensor[T]) decodeShape(d *msgpack.Decoder) error {
	rank, err := d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("reading shape: %w", err)
	}
	if rank < 0 {
		return errors.New("shape is nil")
	}
	if rank > MaxRank {
		return fmt.Errorf("shape rank %d exceeds the maximum %d", rank, MaxRank)
	}
	if t.Shape != nil && cap(t.Shape) >= rank { // non-nil even for rank 0: a scalar
		t.Shape = t.Shape[:rank]
	} else {
		t.Shape = make([]int, rank)
	}
	for i := range t.Shape {
		// DecodeInt64 reads nil as 0; a nil dimension is malformed.
		if c, err := d.PeekCode(); err != nil {
			return fmt.Errorf("reading shape: %w", err)
		} else if c == msgpcode.Nil {
			return errors.New("shape has a nil dimension")
		}
		v, err := d.DecodeInt64()
		if err != nil {
			return fmt.Errorf("reading shape: %w", err)
		}
		if v < 0 || v > math.MaxInt32 {
			// MaxInt32 keeps later products within int on 32-bit hosts
			// too; no real dimension comes close.
			return fmt.Errorf("shape dimension %d out of range", v)
		}
		t.Shape[i] = int(v)
	}
	return nil
}

// decodeData reads the bin holding the elements. want is prod(shape) when the
// shape came first (then a length mismatch fails before any allocation), or
// -1 when the data came first (the caller checks against the shape later).
func (t *Tensor[T]) decodeData(d *msgpack.Decoder, size, want int) error {
	nbytes, err := d.DecodeBytesLen()
	if err != nil {
		return fmt.Errorf("reading data: %w", err)
	}
	if nbytes < 0 {
		return errors.New("data is nil")
	}
	if nbytes%size != 0 {
		return fmt.Errorf("data has %d bytes, not a multiple of the item size %d", nbytes, size)
	}
	n := nbytes / size
	if want >= 0 && n != want {
		return fmt.Errorf("shape %v needs %d bytes, data has %d", t.Shape, want*size, nbytes)
	}
	data := t.Data[:0]
	if data == nil {
		data = []T{} // an empty tensor has empty, not nil, data; no allocation
	}
	if cap(data) >= n {
		data = data[:n]
		if err := readElems(d, data); err != nil {
			return fmt.Errorf("reading data: %w", err)
		}
		t.Data = data
		return nil
	}
	step := max(readChunk/size, 1)
	for len(data) < n {
		k := min(n-len(data), step)
		data = slices.Grow(data, k)
		start := len(data)
		data = data[:start+k]
		if err := readElems(d, data[start:]); err != nil {
			return fmt.Errorf("reading data: %w", err)
		}
	}
	t.Data = data
	return nil
}

// readElems fills dst from little-endian wire bytes.
func readElems[T Numeric](d *msgpack.Decoder, dst []T) error {
	if hostLittleEndian {
		return d.ReadFull(asBytes(dst))
	}
	_, size := dtypeOf[T]()
	b := make([]byte, len(dst)*size)
	if err := d.ReadFull(b); err != nil {
		return err
	}
	decodeLittleEndian(dst, b)
	return nil
}

// appendLittleEndian appends the little-endian bytes of s to b. It is the
// portable path for big-endian hosts.
func appendLittleEndian[T Numeric](b []byte, s []T) []byte {
	switch s := any(s).(type) {
	case []float32:
		for _, v := range s {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	case []float64:
		for _, v := range s {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	case []int32:
		for _, v := range s {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	case []int64:
		for _, v := range s {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	case []uint8:
		b = append(b, s...)
	}
	return b
}

// decodeLittleEndian fills dst from little-endian bytes; len(b) must be
// len(dst) times the item size. It is the portable path for big-endian hosts.
func decodeLittleEndian[T Numeric](dst []T, b []byte) {
	switch dst := any(dst).(type) {
	case []float32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []float64:
		for i := range dst {
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []int32:
		for i := range dst {
			dst[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []int64:
		for i := range dst {
			dst[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []uint8:
		copy(dst, b)
	}
}
