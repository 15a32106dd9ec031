package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/distrl/distrl/internal/msgpackcheck"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxPooledBuffer bounds the buffers kept in encoderPool so that one huge
// message does not pin its memory for the life of the process.
const maxPooledBuffer = 1 << 20

// encoder is a msgpack encoder bound to its own buffer, pooled because every
// request and reply needs one and both are short lived.
type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = msgpack.NewEncoder(&e.buf)
	// Compact ints keep small numbers small on the wire, which is what
	// other msgpack implementations produce and expect.
	e.enc.UseCompactInts(true)
	return e
}}

func getEncoder() *encoder {
	e := encoderPool.Get().(*encoder)
	e.buf.Reset()
	return e
}

func putEncoder(e *encoder) {
	if e.buf.Cap() > maxPooledBuffer {
		return
	}
	encoderPool.Put(e)
}

// Args is the undecoded kwargs map of a request. Its bytes alias the received
// message, which belongs to the handler; they are never reused by the server.
type Args struct {
	raw []byte
}

// RawArgs returns Args holding raw msgpack bytes, for calling a Handler
// directly (in tests or in-process dispatch).
func RawArgs(raw []byte) Args { return Args{raw: raw} }

// Raw returns the msgpack encoding of the kwargs: a map, or nil (0xc0) when
// the client sent nil.
func (a Args) Raw() []byte { return a.raw }

// Decode decodes the kwargs into v, which must be a pointer, strictly: a
// key that v has no field for is an error, so that a misspelt key cannot
// silently leave a default in place. Absent, nil, and empty kwargs leave v
// untouched, so a handler's defaults survive. A failure is an *Error of type
// bad_arguments, which a handler can return as is (or wrap with %w to say
// what it was decoding: the type stays).
func (a Args) Decode(v any) error {
	if isEmptyKwargs(a.raw) {
		return nil
	}
	dec := msgpack.NewDecoder(bytes.NewReader(a.raw))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return &Error{Type: ErrTypeBadArguments, Message: fmt.Sprintf("decode kwargs into %T: %v", v, err)}
	}
	return nil
}

func isEmptyKwargs(raw []byte) bool {
	return len(raw) == 0 || (len(raw) == 1 && (raw[0] == msgpcode.Nil || raw[0] == msgpcode.FixedMapLow))
}

func isMapCode(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// encodeRequest writes [command, kwargs] into e, or [command, kwargs,
// target] when the request names the worker it is for. kwargs that encode
// as nil (nil, a nil map or pointer) become an empty map so the wire shape
// is always [string, map, ...]; anything else that is not a map is refused
// here rather than by the server.
func encodeRequest(e *encoder, target, command string, kwargs any) error {
	e.buf.Reset()
	n := 2
	if target != "" {
		n = 3
	}
	if err := e.enc.EncodeArrayLen(n); err != nil {
		return err
	}
	if err := encodeKwargs(e, command, kwargs); err != nil {
		return err
	}
	if target != "" {
		return e.enc.EncodeString(target)
	}
	return nil
}

// encodeKwargs writes command and its kwargs map.
func encodeKwargs(e *encoder, command string, kwargs any) error {
	if err := e.enc.EncodeString(command); err != nil {
		return err
	}
	start := e.buf.Len()
	if raw, ok := kwargs.(msgpack.RawMessage); kwargs == nil || (ok && len(raw) == 0) {
		return e.enc.EncodeMapLen(0)
	}
	if err := e.enc.Encode(kwargs); err != nil {
		return fmt.Errorf("rpc: encode kwargs of %q: %w", command, err)
	}
	enc := e.buf.Bytes()[start:]
	switch {
	case len(enc) == 1 && enc[0] == msgpcode.Nil:
		e.buf.Truncate(start)
		return e.enc.EncodeMapLen(0)
	case len(enc) == 0 || !isMapCode(enc[0]):
		return fmt.Errorf("rpc: kwargs of %q: %T does not encode as a msgpack map", command, kwargs)
	}
	return nil
}

// MaxCommandLen is the longest command name, in bytes, that a server
// accepts; a longer one is a bad_request, rejected before it is copied.
const MaxCommandLen = 256

// request is a decoded request. args alias the payload.
type request struct {
	command string
	args    Args
	// target names the worker the request is for; "" when it names none.
	target string
}

// decodeRequest parses a [command, kwargs] or [command, kwargs, target]
// payload (target a string or nil). The payload is checked before anything
// is decoded, so that lengths and counts it claims cannot make the decoder
// allocate more than its size.
func decodeRequest(payload []byte) (request, *Error) {
	if err := msgpackcheck.Check(payload); err != nil {
		return request{}, Errorf(ErrTypeBadRequest, "request is not one well-formed msgpack value: %v", err)
	}
	r := bytes.NewReader(payload)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	// bytes.Reader is an io.ByteScanner, so the decoder reads from it
	// directly without buffering ahead; offsets into payload stay exact.
	dec.Reset(r)

	elems, err := dec.DecodeArrayLen()
	if err != nil || (elems != 2 && elems != 3) {
		return request{}, Errorf(ErrTypeBadRequest, "request must be a msgpack array [command, kwargs] or [command, kwargs, worker]")
	}
	n, err := dec.DecodeBytesLen() // str or bin
	if err != nil || n < 0 {
		return request{}, Errorf(ErrTypeBadRequest, "command must be a string")
	}
	if n > MaxCommandLen {
		return request{}, Errorf(ErrTypeBadRequest, "command name of %d bytes, the limit is %d", n, MaxCommandLen)
	}
	start := len(payload) - r.Len()
	command := string(payload[start : start+n])
	if _, err := r.Seek(int64(n), io.SeekCurrent); err != nil {
		return request{}, Errorf(ErrTypeBadRequest, "command: %v", err)
	}
	code, err := dec.PeekCode()
	if err != nil || (code != msgpcode.Nil && !isMapCode(code)) {
		return request{}, Errorf(ErrTypeBadRequest, "kwargs of %q must be a map or nil", command)
	}
	start = len(payload) - r.Len()
	if err := dec.Skip(); err != nil {
		return request{}, Errorf(ErrTypeBadRequest, "kwargs of %q: %v", command, err)
	}
	end := len(payload) - r.Len()
	req := request{command: command, args: Args{raw: payload[start:end:end]}}
	if elems == 3 {
		// The check above bounds the string by the bytes present.
		if req.target, err = dec.DecodeString(); err != nil {
			return request{}, Errorf(ErrTypeBadRequest, "worker of %q must be a string or nil", command)
		}
	}
	if rest := r.Len(); rest != 0 {
		return request{}, Errorf(ErrTypeBadRequest, "%d trailing bytes after request", rest)
	}
	return req, nil
}

// encodeOK writes {"ok": v} into e.
func encodeOK(e *encoder, v any) error {
	e.buf.Reset()
	if err := e.enc.EncodeMapLen(1); err != nil {
		return err
	}
	if err := e.enc.EncodeString("ok"); err != nil {
		return err
	}
	// An empty RawMessage would write no bytes at all and corrupt the map.
	if raw, ok := v.(msgpack.RawMessage); ok && len(raw) == 0 {
		return e.enc.EncodeNil()
	}
	return e.enc.Encode(v)
}

// encodeError writes {"error": {"type": ..., "message": ...}} into e.
func encodeError(e *encoder, re *Error) {
	e.buf.Reset()
	// Writes into a bytes.Buffer cannot fail.
	_ = e.enc.EncodeMapLen(1)
	_ = e.enc.EncodeString("error")
	_ = e.enc.EncodeMapLen(2)
	_ = e.enc.EncodeString("type")
	_ = e.enc.EncodeString(re.Type)
	_ = e.enc.EncodeString("message")
	_ = e.enc.EncodeString(re.Message)
}

var errMalformedReply = errors.New("rpc: malformed reply")

// decodeReply decodes a reply payload into reply (nil discards it; a
// *msgpack.RawMessage receives the raw "ok" value). A remote error is
// returned as *Error.
func decodeReply(payload []byte, reply any) error {
	ok, rerr, err := splitReply(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	if rerr != nil {
		return rerr
	}
	switch r := reply.(type) {
	case nil:
		return nil
	case *msgpack.RawMessage:
		*r = ok
		return nil
	}
	if err := msgpack.Unmarshal(ok, reply); err != nil {
		return fmt.Errorf("rpc: decode reply into %T: %w", reply, err)
	}
	return nil
}

// splitReply parses {"ok": value} or {"error": {...}}, returning the raw
// value (aliasing payload) or the remote error. It walks the map by hand
// because a struct decode cannot tell {"ok": nil} from a missing "ok".
func splitReply(payload []byte) (msgpack.RawMessage, *Error, error) {
	if err := msgpackcheck.Check(payload); err != nil {
		return nil, nil, err
	}
	r := bytes.NewReader(payload)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(r)
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, nil, err
	}
	var ok msgpack.RawMessage
	var rerr *Error
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return nil, nil, err
		}
		switch key {
		case "ok":
			start := len(payload) - r.Len()
			if err := dec.Skip(); err != nil {
				return nil, nil, err
			}
			end := len(payload) - r.Len()
			ok = payload[start:end:end]
		case "error":
			rerr = new(Error)
			if err := dec.Decode(rerr); err != nil {
				return nil, nil, err
			}
			if rerr.Type == "" {
				return nil, nil, errors.New("error without a type")
			}
		default:
			if err := dec.Skip(); err != nil {
				return nil, nil, err
			}
		}
	}
	if rerr == nil && ok == nil {
		return nil, nil, errors.New(`neither "ok" nor "error"`)
	}
	return ok, rerr, nil
}
