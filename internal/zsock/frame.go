package zsock

import (
	"bytes"
	"fmt"

	"github.com/distrl/distrl/internal/msgpackcheck"
	"github.com/vmihailenco/msgpack/v5"
)

// Decoder is a msgpack decoder over one received frame at a time, reused
// from frame to frame.
type Decoder struct {
	rd  bytes.Reader
	dec *msgpack.Decoder
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
	d.dec.Reset(&d.rd)
	return d.dec, nil
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
