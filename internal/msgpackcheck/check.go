package msgpackcheck

import (
	"encoding/binary"
	"fmt"
)

// MaxDepth is the deepest nesting of arrays and maps that Check accepts; a
// top-level array is depth 1. No distrl message comes close.
const MaxDepth = 64

// Reason says why Check rejected its input.
type Reason uint8

const (
	// Truncated: the input ends inside a header or a value.
	Truncated Reason = iota + 1
	// TooLong: a length or element count claims more than the rest of the
	// input can hold.
	TooLong
	// TooDeep: containers nest deeper than MaxDepth.
	TooDeep
	// InvalidCode: the byte 0xc1, which msgpack never uses.
	InvalidCode
	// Trailing: bytes follow the value.
	Trailing
)

func (r Reason) String() string {
	switch r {
	case Truncated:
		return "truncated"
	case TooLong:
		return "too long"
	case TooDeep:
		return "too deep"
	case InvalidCode:
		return "invalid code"
	case Trailing:
		return "trailing bytes"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Error describes where and why Check rejected its input.
type Error struct {
	Reason Reason
	// Offset is the byte offset of the offending header (for Trailing,
	// where the value ended).
	Offset int
	// Code is the first byte of the offending header; Header names it
	// ("bin32", "array16", ...). Both are zero for Trailing.
	Code   byte
	Header string
	// Claimed is the length or count the header claims (for TooLong), and
	// Remaining the bytes left after the header (TooLong, Truncated,
	// Trailing).
	Claimed   uint64
	Remaining int
}

func (e *Error) Error() string {
	at := fmt.Sprintf("msgpack: %s header (0x%02x) at offset %d", e.Header, e.Code, e.Offset)
	switch e.Reason {
	case TooLong:
		what := "bytes"
		switch e.Header {
		case "fixarray", "array16", "array32":
			what = "elements"
		case "fixmap", "map16", "map32":
			what = "entries"
		case "ext8", "ext16", "ext32":
			what = "bytes and a type byte"
		}
		return fmt.Sprintf("%s claims %d %s, only %d bytes follow", at, e.Claimed, what, e.Remaining)
	case Truncated:
		if e.Header == "" {
			return "msgpack: empty input"
		}
		if e.Claimed > 0 {
			return fmt.Sprintf("%s: input ends with %d values missing", at, e.Claimed)
		}
		return fmt.Sprintf("%s: input ends early (%d bytes follow)", at, e.Remaining)
	case TooDeep:
		return fmt.Sprintf("%s nests deeper than %d", at, MaxDepth)
	case InvalidCode:
		return fmt.Sprintf("msgpack: invalid code 0xc1 at offset %d", e.Offset)
	case Trailing:
		return fmt.Sprintf("msgpack: %d trailing bytes after the value at offset %d", e.Remaining, e.Offset)
	}
	return at + ": " + e.Reason.String()
}

// kind of a header: how its size is found.
const (
	kFixed  = iota // size bytes in all (header included)
	kLen           // a length of lenBytes bytes follows the code, then the payload (plus ext's type byte)
	kArray         // a count of lenBytes bytes (0: in the code) follows, then count values
	kMap           // as kArray, with 2*count values
	kBad           // 0xc1
	kFixLen        // fixstr: length in the code
)

type header struct {
	name     string
	kind     uint8
	size     uint8 // kFixed: total bytes; kLen: extra bytes after the length (ext type)
	lenBytes uint8
}

// headers is indexed by the first byte of a value.
var headers = func() (t [256]header) {
	for c := 0x00; c <= 0x7f; c++ {
		t[c] = header{"positive fixint", kFixed, 1, 0}
	}
	for c := 0x80; c <= 0x8f; c++ {
		t[c] = header{"fixmap", kMap, 0, 0}
	}
	for c := 0x90; c <= 0x9f; c++ {
		t[c] = header{"fixarray", kArray, 0, 0}
	}
	for c := 0xa0; c <= 0xbf; c++ {
		t[c] = header{"fixstr", kFixLen, 0, 0}
	}
	for c := 0xe0; c <= 0xff; c++ {
		t[c] = header{"negative fixint", kFixed, 1, 0}
	}
	t[0xc0] = header{"nil", kFixed, 1, 0}
	t[0xc1] = header{"never used", kBad, 0, 0}
	t[0xc2] = header{"false", kFixed, 1, 0}
	t[0xc3] = header{"true", kFixed, 1, 0}
	t[0xc4] = header{"bin8", kLen, 0, 1}
	t[0xc5] = header{"bin16", kLen, 0, 2}
	t[0xc6] = header{"bin32", kLen, 0, 4}
	t[0xc7] = header{"ext8", kLen, 1, 1}
	t[0xc8] = header{"ext16", kLen, 1, 2}
	t[0xc9] = header{"ext32", kLen, 1, 4}
	t[0xca] = header{"float32", kFixed, 5, 0}
	t[0xcb] = header{"float64", kFixed, 9, 0}
	t[0xcc] = header{"uint8", kFixed, 2, 0}
	t[0xcd] = header{"uint16", kFixed, 3, 0}
	t[0xce] = header{"uint32", kFixed, 5, 0}
	t[0xcf] = header{"uint64", kFixed, 9, 0}
	t[0xd0] = header{"int8", kFixed, 2, 0}
	t[0xd1] = header{"int16", kFixed, 3, 0}
	t[0xd2] = header{"int32", kFixed, 5, 0}
	t[0xd3] = header{"int64", kFixed, 9, 0}
	t[0xd4] = header{"fixext1", kFixed, 3, 0}
	t[0xd5] = header{"fixext2", kFixed, 4, 0}
	t[0xd6] = header{"fixext4", kFixed, 6, 0}
	t[0xd7] = header{"fixext8", kFixed, 10, 0}
	t[0xd8] = header{"fixext16", kFixed, 18, 0}
	t[0xd9] = header{"str8", kLen, 0, 1}
	t[0xda] = header{"str16", kLen, 0, 2}
	t[0xdb] = header{"str32", kLen, 0, 4}
	t[0xdc] = header{"array16", kArray, 0, 2}
	t[0xdd] = header{"array32", kArray, 0, 4}
	t[0xde] = header{"map16", kMap, 0, 2}
	t[0xdf] = header{"map32", kMap, 0, 4}
	return t
}()

// Check reports whether b holds exactly one msgpack value whose lengths
// and counts all fit in b, nested at most MaxDepth deep. A rejection is an
// *Error. Check does not allocate unless it fails.
func Check(b []byte) error {
	// pending[i] is the number of values still to read in the i-th open
	// container; a fixed array keeps the walk off the heap.
	var pending [MaxDepth]uint64
	var starts [MaxDepth]int // offset of each open container's header
	depth := 0
	off := 0
	for {
		if off >= len(b) {
			if depth == 0 { // empty input
				return &Error{Reason: Truncated}
			}
			// Blame the innermost open container, whose count promised
			// more values than came.
			s := starts[depth-1]
			return &Error{Reason: Truncated, Offset: s, Code: b[s], Header: headers[b[s]].name,
				Claimed: pending[depth-1], Remaining: len(b) - s}
		}
		c := b[off]
		h := &headers[c]
		rest := len(b) - off - 1 // bytes after the code
		var n uint64             // length or count
		switch h.kind {
		case kFixed:
			if int(h.size)-1 > rest {
				return &Error{Reason: Truncated, Offset: off, Code: c, Header: h.name, Remaining: rest}
			}
			off += int(h.size)
		case kBad:
			return &Error{Reason: InvalidCode, Offset: off, Code: c, Header: h.name}
		case kFixLen:
			if n = uint64(c & 0x1f); n > uint64(rest) {
				return &Error{Reason: TooLong, Offset: off, Code: c, Header: h.name, Claimed: n, Remaining: rest}
			}
			off += 1 + int(n)
		default:
			if int(h.lenBytes) > rest {
				return &Error{Reason: Truncated, Offset: off, Code: c, Header: h.name, Remaining: rest}
			}
			switch h.lenBytes {
			case 0:
				n = uint64(c & 0x0f)
			case 1:
				n = uint64(b[off+1])
			case 2:
				n = uint64(binary.BigEndian.Uint16(b[off+1:]))
			case 4:
				n = uint64(binary.BigEndian.Uint32(b[off+1:]))
			}
			rest -= int(h.lenBytes)
			need := n + uint64(h.size) // bytes the value needs after its header, at least
			if h.kind == kMap {
				need = 2 * n
			}
			if need > uint64(rest) {
				return &Error{Reason: TooLong, Offset: off, Code: c, Header: h.name, Claimed: n, Remaining: rest}
			}
			off += 1 + int(h.lenBytes)
			if h.kind == kLen {
				off += int(need)
				break
			}
			if n == 0 {
				break // an empty container is a complete value
			}
			if depth == MaxDepth {
				return &Error{Reason: TooDeep, Offset: off - 1 - int(h.lenBytes), Code: c, Header: h.name}
			}
			if h.kind == kMap {
				n *= 2
			}
			pending[depth] = n
			starts[depth] = off - 1 - int(h.lenBytes)
			depth++
			continue
		}
		// A value is complete: count it against the open containers,
		// closing every one it completes.
		for depth > 0 {
			pending[depth-1]--
			if pending[depth-1] > 0 {
				break
			}
			depth--
		}
		if depth == 0 {
			break
		}
	}
	if off != len(b) {
		return &Error{Reason: Trailing, Offset: off, Remaining: len(b) - off}
	}
	return nil
}
