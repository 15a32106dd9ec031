package api

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Frames are observations: a Tensor[float32] that travels packed to one
// bit per value when every value is 0 or 1, as a MinAtar game's channels
// are. A Seaquest transition of a replay (localreplay) is about 8 KB of
// float32 and 400 bytes packed, so a replay of 100,000 of them holds 40 MB
// rather than 800 MB, and its checkpoints shrink alike; a sample batch of
// 64 Breakout steps (SampleBatch.Obs) is 100 KB of float32 and 3.2 KB
// packed. Any other observation travels as a Tensor. Decoding takes
// either form.
//
// The packed form is the msgpack array [shape, bits]: shape as a
// Tensor's, bits a bin of ceil(n/8) bytes for n = prod(shape) values,
// value i in bit i%8 (least significant first) of byte i/8. A Python
// reader unpacks it with numpy.unpackbits(bits, bitorder="little")[:n].
type Frames struct {
	Tensor[float32]
	binary bool // the last decode into it read the packed form
}

// NewFrames wraps a tensor.
func NewFrames(t Tensor[float32]) Frames { return Frames{Tensor: t} }

// Binary reports whether the last decode into f read the packed form, so
// that every value it decoded is exactly 0 or 1: finite, which spares a
// learner checking a MinAtar update's millions of values again. Frames
// made any other way, or whose Data a caller changed after decoding, do
// not say so (a caller that writes into Data after decoding must not ask).
func (f Frames) Binary() bool { return f.binary }

// packChunk is how many packed bytes the decoder reads at a time.
const packChunk = 512

// unpacked[b] are the eight values byte b packs, least significant bit
// first.
var unpacked = func() (t [256][8]float32) {
	for b := range t {
		for i := range 8 {
			t[b][i] = float32(b >> i & 1)
		}
	}
	return t
}()

// EncodeMsgpack implements [msgpack.CustomEncoder].
func (f Frames) EncodeMsgpack(e *msgpack.Encoder) error {
	if f.IsZero() || len(f.Data) > 0 && f.Data[0] != 0 && f.Data[0] != 1 {
		// Not binary, almost always, by the first value.
		return f.Tensor.EncodeMsgpack(e)
	}
	// Pack and check in one pass over the values, then write.
	bp := packBufs.Get().(*[]byte)
	defer packBufs.Put(bp)
	*bp = slices.Grow((*bp)[:0], (len(f.Data)+7)/8)
	bits, ok := packBits((*bp)[:(len(f.Data)+7)/8], f.Data)
	if !ok {
		return f.Tensor.EncodeMsgpack(e)
	}
	if err := f.Validate(); err != nil {
		return fmt.Errorf("api: encoding frames: %w", err)
	}
	if err := e.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(f.Shape)); err != nil {
		return err
	}
	for _, d := range f.Shape {
		if err := e.EncodeInt(int64(d)); err != nil {
			return err
		}
	}
	if err := e.EncodeBytesLen(len(bits)); err != nil {
		return err
	}
	_, err := e.Writer().Write(bits)
	return err
}

// packBufs hold the packed bits of an encoding until they are written.
var packBufs = sync.Pool{New: func() any { return new([]byte) }}

// one is 1's bits as a float32.
const one = 0x3f800000

// packBits packs vals into dst (ceil(len(vals)/8) bytes), least
// significant bit first, and reports whether every value was 0 or 1; if
// not, dst holds nothing of use. A value's bit is its bit 29 (set in 1,
// clear in 0), and its bits are those of 0 or 1 exactly when they equal
// that bit times 1's: eight values to a byte, and the check, without a
// branch per value.
func packBits(dst []byte, vals []float32) ([]byte, bool) {
	var bad uint32
	whole := len(vals) / 8
	for j := range whole {
		v := vals[8*j : 8*j+8 : 8*j+8]
		var packed uint32
		for i := range 8 {
			b := math.Float32bits(v[i])
			bit := b >> 29 & 1
			bad |= b ^ bit*one
			packed |= bit << i
		}
		dst[j] = byte(packed)
	}
	if rest := vals[8*whole:]; len(rest) > 0 {
		var packed uint32
		for i, v := range rest {
			b := math.Float32bits(v)
			bit := b >> 29 & 1
			bad |= b ^ bit*one
			packed |= bit << i
		}
		dst[whole] = byte(packed)
	}
	return dst, bad == 0
}

// DecodeMsgpack implements [msgpack.CustomDecoder]. f's storage is reused
// when it suffices. Packed values are read as their bytes arrive, so a
// header that claims more than the frame holds fails before the values it
// claims are allocated. On error f is left zero.
func (f *Frames) DecodeMsgpack(d *msgpack.Decoder) error {
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	f.binary = false
	if !msgpcode.IsFixedArray(c) && c != msgpcode.Array16 && c != msgpcode.Array32 {
		return f.Tensor.DecodeMsgpack(d)
	}
	if err := f.decodePacked(d); err != nil {
		f.Tensor = Tensor[float32]{}
		return fmt.Errorf("api: decoding packed frames: %w", err)
	}
	f.binary = true
	return nil
}

// unpackBits sets dst to the bits of packed, eight values to a byte: whole
// bytes through a table of their eight values, the rest bit by bit (a
// value at a time was most of a DQN trainer's decoding of its sampled
// transitions). An array assignment, not copy: the compiler moves the 32
// bytes inline, where copy called memmove for each (half the decoding).
func unpackBits(dst []float32, packed []byte) {
	whole := len(dst) / 8
	for j, c := range packed[:whole] {
		*(*[8]float32)(dst[8*j:]) = unpacked[c]
	}
	for i := 8 * whole; i < len(dst); i++ {
		dst[i] = float32(packed[i>>3] >> (i & 7) & 1)
	}
}

// DecodeFast decodes frames from the front of b as DecodeMsgpack would,
// where b starts with them in the form EncodeMsgpack writes (packed, or a
// tensor in Tensor.DecodeFast's form), straight from the bytes; it
// returns the bytes after them. ok is false for anything else, and f is
// then in no particular state: decode with DecodeMsgpack. Storage is
// reused as DecodeMsgpack reuses it.
func (f *Frames) DecodeFast(b []byte) (rest []byte, ok bool) {
	if len(b) < 2 || b[0] != 0x92 || b[1]&0xf0 != 0x90 { // [shape, bits], the shape a fixarray
		f.binary = false
		return f.Tensor.DecodeFast(b)
	}
	rank := int(b[1] & 0x0f)
	if rank < 1 || rank > MaxRank {
		return nil, false
	}
	shape, n, i := f.Shape[:0], 1, 2
	for range rank {
		d, next, ok := fastDim(b, i)
		if !ok || (d > 0 && n > math.MaxInt32/d) {
			return nil, false
		}
		shape, n, i = append(shape, d), n*d, next
	}
	nbytes, start, ok := fastBinLen(b, i)
	if !ok || nbytes != (n+7)/8 {
		return nil, false
	}
	data := slices.Grow(f.Data[:0], n)[:n]
	unpackBits(data, b[start:start+nbytes])
	if data == nil {
		data = []float32{}
	}
	f.Shape, f.Data, f.binary = shape, data, true
	return b[start+nbytes:], true
}

func (f *Frames) decodePacked(d *msgpack.Decoder) error {
	if n, err := d.DecodeArrayLen(); err != nil || n != 2 {
		return errors.Join(err, fmt.Errorf("an array of %d, want [shape, bits]", n))
	}
	rank, err := d.DecodeArrayLen()
	if err != nil {
		return fmt.Errorf("reading shape: %w", err)
	}
	if rank < 1 || rank > MaxRank {
		return fmt.Errorf("shape rank %d, want 1 to %d", rank, MaxRank)
	}
	shape := f.Shape[:0]
	n := 1
	for range rank {
		v, err := d.DecodeInt64()
		if err != nil {
			return fmt.Errorf("reading shape: %w", err)
		}
		if v < 0 || v > math.MaxInt32 || (v > 0 && n > math.MaxInt32/int(v)) {
			return fmt.Errorf("shape %v, %d: out of range", shape, v)
		}
		shape = append(shape, int(v))
		n *= int(v)
	}
	nbytes, err := d.DecodeBytesLen()
	if err != nil {
		return fmt.Errorf("reading bits: %w", err)
	}
	if nbytes != (n+7)/8 {
		return fmt.Errorf("shape %v has %d values: want %d bytes of bits, have %d", shape, n, (n+7)/8, nbytes)
	}
	data := f.Data[:0]
	buf := getScratch()
	defer putScratch(buf)
	for len(data) < n {
		k := min(n-len(data), 8*len(buf))
		chunk := buf[:(k+7)/8]
		if err := d.ReadFull(chunk); err != nil {
			return fmt.Errorf("reading bits: %w", err)
		}
		data = slices.Grow(data, k)
		unpackBits(data[len(data):len(data)+k], chunk)
		data = data[:len(data)+k]
	}
	if data == nil {
		data = []float32{}
	}
	f.Shape, f.Data = shape, data
	return nil
}
