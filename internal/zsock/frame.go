package zsock

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/distrl/distrl/internal/msgpackcheck"
	"github.com/vmihailenco/msgpack/v5"
)

// Decoder is a msgpack decoder over one received frame at a time, reused
// from frame to frame.
type Decoder struct {
	rd    bytes.Reader
	dec   *msgpack.Decoder
	frame []byte   // the frame being decoded; rd's position in it is dec's
	key   [32]byte // Key's; in the Decoder, as a buffer on the stack would escape
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}

// Reset points the decoder at frame and returns it, after checking that
// frame is one well-formed msgpack value whose lengths and counts fit in
// it (see package msgpackcheck): a peer's header then cannot make the
// decoder allocate more than the frame's size. A frame that fails the
// check is an error and the decoder is not reset. Reset clears the
// decoder's flags (DisallowUnknownFields among them).
func (d *Decoder) Reset(frame []byte) (*msgpack.Decoder, error) {
	if err := msgpackcheck.Check(frame); err != nil {
		return nil, err
	}
	d.rd.Reset(frame)
	d.dec.Reset(&d.rd) // a bytes.Reader is read as it is, not through a buffer
	d.frame = frame
	return d.dec, nil
}

// Rest is what is left of the frame to decode, for a decoder that reads
// the bytes themselves (api's DecodeFast methods); Skip moves past what it
// read. It is valid until the next Reset.
func (d *Decoder) Rest() []byte { return d.frame[len(d.frame)-d.rd.Len():] }

// Skip moves past the next n bytes of Rest.
func (d *Decoder) Skip(n int) { _, _ = d.rd.Seek(int64(n), io.SeekCurrent) }

// Float32 reads a float32, straight from the frame in the form msgpack
// writes one (a float32 code and its 4 bytes), else the decoder's way (any
// number it converts).
func (d *Decoder) Float32() (float32, error) {
	if r := d.Rest(); len(r) >= 5 && r[0] == 0xca {
		d.Skip(5)
		return math.Float32frombits(binary.BigEndian.Uint32(r[1:])), nil
	}
	return d.dec.DecodeFloat32()
}

// Key reads a map key of the frame being decoded, a string of at most 32
// bytes (longer is an error: no key of the protocol is), without
// allocating. It is valid until the next Key.
func (d *Decoder) Key() ([]byte, error) {
	// A short key, as msgpack writes every key of the protocol, read
	// where it lies: the decoder's way was two calls through its reader.
	if r := d.Rest(); len(r) > 0 && r[0]&0xe0 == 0xa0 {
		if n := int(r[0] & 0x1f); n < len(r) {
			d.Skip(1 + n)
			return r[1 : 1+n], nil
		}
	}
	n, err := d.dec.DecodeBytesLen()
	switch {
	case err != nil:
		return nil, err
	case n < 0:
		return nil, fmt.Errorf("got nil, want a key")
	case n > len(d.key):
		return nil, fmt.Errorf("a key of %d bytes, want at most %d", n, len(d.key))
	}
	if err := d.dec.ReadFull(d.key[:n]); err != nil {
		return nil, err
	}
	return d.key[:n], nil
}

// Finish reports trailing bytes after the message: a frame holds exactly
// one msgpack value, and anything else means the peer speaks something
// else.
func (d *Decoder) Finish() error {
	if n := d.rd.Len(); n != 0 {
		return fmt.Errorf("%d trailing bytes after the message", n)
	}
	return nil
}

// Encoder is a msgpack encoder writing into a buffer that is reused for
// every message, so steady-state encoding does not allocate. Writing into a
// bytes.Buffer also lets api.Tensor align large arrays in the output.
type Encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewEncoder returns an empty Encoder.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	return e
}

// Reset empties the buffer for the next message and returns the encoder
// that writes into it.
func (e *Encoder) Reset() *msgpack.Encoder {
	e.buf.Reset()
	return e.enc
}

// Bytes is the message encoded since the last Reset; it is valid until
// the next Reset.
func (e *Encoder) Bytes() []byte { return e.buf.Bytes() }

// Len is the length of Bytes.
func (e *Encoder) Len() int { return e.buf.Len() }
