package mptest

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Frame is one hostile message and a name for test output.
type Frame struct {
	Name  string
	Bytes []byte
}

// IssueFrames are the two requests of the issue that made a worker
// allocate about 2 GB: a bin32 claiming 0x73746174 bytes as the command,
// and a str32 claiming 0x6e930102 bytes inside the kwargs.
func IssueFrames() []Frame {
	return []Frame{
		{"issue/bin32-command", []byte{0x92, 0xc6, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73, 0x80}},
		{"issue/str32-in-kwargs", []byte{
			0x92, 0xa4, 'e', 'c', 'h', 'o', 0x82, 0xa3, 'm', 's', 'g', 0xaa,
			'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x',
			0xdb, 0x6e, 0x93, 0x01, 0x02, 0x81, 0xa1, 0x61, 0xc0}},
	}
}

// header is one length or count header: its code and the width of its
// length field.
type header struct {
	name  string
	code  byte
	width int
}

var headers = []header{
	{"bin8", 0xc4, 1}, {"bin16", 0xc5, 2}, {"bin32", 0xc6, 4},
	{"ext8", 0xc7, 1}, {"ext16", 0xc8, 2}, {"ext32", 0xc9, 4},
	{"str8", 0xd9, 1}, {"str16", 0xda, 2}, {"str32", 0xdb, 4},
	{"array16", 0xdc, 2}, {"array32", 0xdd, 4},
	{"map16", 0xde, 2}, {"map32", 0xdf, 4},
}

// claims returns the lengths a header of width bytes is made to claim:
// its largest, and for 32-bit fields 1 MiB + 1, 1.9 GB and 2 GiB too.
func claims(width int) []uint32 {
	switch width {
	case 1:
		return []uint32{0xff}
	case 2:
		return []uint32{0xffff}
	}
	return []uint32{1<<20 + 1, 0x73746174, 1 << 31, 0xffffffff}
}

// tail follows every hostile header: a few bytes of plausible content
// (an ext type, then a fixmap {"a": nil}), far fewer than claimed.
var tail = []byte{0x01, 0x81, 0xa1, 'a', 0xc0}

// Values are single hostile values: every length and count header
// claiming far more than the few bytes after it.
func Values() []Frame {
	var out []Frame
	for _, h := range headers {
		for _, n := range claims(h.width) {
			b := []byte{h.code}
			switch h.width {
			case 1:
				b = append(b, byte(n))
			case 2:
				b = binary.BigEndian.AppendUint16(b, uint16(n))
			default:
				b = binary.BigEndian.AppendUint32(b, n)
			}
			out = append(out, Frame{fmt.Sprintf("%s/%#x", h.name, n), append(b, tail...)})
		}
	}
	return out
}

// Deep is a value nested depth arrays deep (depth fixarrays of one
// element around a nil).
func Deep(depth int) []byte {
	b := make([]byte, depth, depth+1)
	for i := range b {
		b[i] = 0x91
	}
	return append(b, 0xc0)
}

// Str is the msgpack fixstr s (len(s) < 32).
func Str(s string) []byte {
	return append([]byte{0xa0 | byte(len(s))}, s...)
}

// Map1 is the msgpack map {key: value} with value already encoded.
func Map1(key string, value []byte) []byte {
	return append(append([]byte{0x81}, Str(key)...), value...)
}

// Request is the rpc request [command, kwargs] of encoded parts.
func Request(command, kwargs []byte) []byte {
	return append(append([]byte{0x92}, command...), kwargs...)
}

// Requests are hostile rpc requests [command, kwargs]: each of Values as
// the whole request, as the command, as the kwargs, as a kwarg's value
// and nested two maps deep in the kwargs of "echo"; then the issue's
// frames, a request nested too deep, and one with the unused code 0xc1.
func Requests() []Frame {
	var out []Frame
	echo := Str("echo")
	for _, v := range Values() {
		out = append(out,
			Frame{"top/" + v.Name, v.Bytes},
			Frame{"command/" + v.Name, Request(v.Bytes, []byte{0x80})},
			Frame{"kwargs/" + v.Name, Request(echo, v.Bytes)},
			Frame{"kwarg/" + v.Name, Request(echo, Map1("msg", v.Bytes))},
			Frame{"nested/" + v.Name, Request(echo, Map1("a", Map1("b", v.Bytes)))},
		)
	}
	out = append(out, IssueFrames()...)
	return append(out,
		Frame{"too-deep", Request(echo, Map1("deep", Deep(100)))},
		Frame{"code-0xc1", Request(echo, Map1("msg", []byte{0xc1}))},
	)
}

// InMaps are hostile data-plane messages: each of Values as the value of
// each key in keys, in a one-entry map.
func InMaps(keys ...string) []Frame {
	var out []Frame
	for _, k := range keys {
		for _, v := range Values() {
			out = append(out, Frame{k + "/" + v.Name, Map1(k, v.Bytes)})
		}
	}
	return out
}

// AllocBound is the most a test lets the Go heap allocate while a live
// server handles all of Requests (or InMaps) and answers or drops each:
// a few hundred small frames decode in well under a megabyte, the rest is
// room for whatever else the test process allocates meanwhile, and it is
// far below the gigabytes the frames claim.
const AllocBound = 32 << 20

// Allocated returns the bytes the whole process's Go heap allocated while
// fn ran (runtime.MemStats.TotalAlloc), counting what was freed again.
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Allocation bound for one decode in the fuzz targets: every byte may
// become a small heap object (an empty map for 0x80, an interface slot for
// 0xc0), never what a header claims.
const (
	AllocPerByte = 256
	AllocSlack   = 1 << 20
)

// BoundedAlloc runs decode, which decodes in, and fails t if the heap
// allocated more than AllocPerByte*len(in) + AllocSlack bytes meanwhile.
func BoundedAlloc(t testing.TB, in []byte, decode func()) {
	t.Helper()
	if n, limit := Allocated(decode), uint64(AllocPerByte*len(in)+AllocSlack); n > limit {
		t.Fatalf("decoding %d bytes (% .32x) allocated %d bytes, want at most %d", len(in), in, n, limit)
	}
}

// Seed adds every frame of each list to f's seed corpus.
func Seed(f *testing.F, lists ...[]Frame) {
	for _, l := range lists {
		for _, fr := range l {
			f.Add(fr.Bytes)
		}
	}
}

// Keys are the msgpack map keys of struct v's fields (their msgpack tag
// names), for InMaps: a hostile value under every key a decoder knows.
func Keys(v any) []string {
	var keys []string
	typ := reflect.TypeOf(v)
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("msgpack"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// Nest wraps each frame as the value of key in a one-entry map.
func Nest(key string, frames []Frame) []Frame {
	out := make([]Frame, len(frames))
	for i, f := range frames {
		out[i] = Frame{key + "/" + f.Name, Map1(key, f.Bytes)}
	}
	return out
}

// Marshal is v in msgpack; a failure fails t.
func Marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
