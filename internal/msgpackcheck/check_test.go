package msgpackcheck_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/distrl/distrl/internal/msgpackcheck"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/vmihailenco/msgpack/v5"
)

// TestCheckAcceptsValid: every kind of value the library writes, alone and
// nested, passes.
func TestCheckAcceptsValid(t *testing.T) {
	values := []any{
		nil, true, false, 0, 1, -1, -33, 200, 70000, math.MaxInt64, math.MinInt64, uint64(math.MaxUint64),
		float32(1.5), 2.5, "", "abc", strings.Repeat("s", 40), strings.Repeat("s", 300), strings.Repeat("s", 70000),
		[]byte{}, []byte{1, 2, 3}, make([]byte, 300), make([]byte, 70000),
		[]any{}, []any{1, "a", nil}, make([]int, 20), make([]int, 70000),
		map[string]any{}, map[string]any{"a": 1, "b": []any{map[string]any{"c": []byte{1}}}},
		map[string]int{"0": 0, "1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "a": 10, "b": 11, "c": 12, "d": 13, "e": 14, "f": 15, "g": 16},
		[]any{"echo", map[string]any{"msg": "hi"}},
	}
	for _, v := range values {
		b := mptest.Marshal(t, v)
		if err := msgpackcheck.Check(b); err != nil {
			t.Errorf("Check(%T %.40v) = %v", v, v, err)
		}
	}
	// Extensions of every size, written by hand: the library only writes
	// the ones it has types for.
	for _, b := range [][]byte{
		{0xd4, 1, 0}, {0xd5, 1, 0, 0}, {0xd6, 1, 0, 0, 0, 0}, {0xd7, 1, 0, 0, 0, 0, 0, 0, 0, 0},
		append([]byte{0xd8, 1}, make([]byte, 16)...), {0xc7, 0, 1}, {0xc7, 2, 1, 0, 0},
		{0xc8, 0, 1, 1, 0}, {0xc9, 0, 0, 0, 0, 1}, {0xdc, 0, 0}, {0xdd, 0, 0, 0, 1, 0xc0}, {0xde, 0, 1, 0xc0, 0xc0},
		mptest.Deep(msgpackcheck.MaxDepth),
	} {
		if err := msgpackcheck.Check(b); err != nil {
			t.Errorf("Check(% x) = %v", b, err)
		}
	}
}

func TestCheckRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     []byte
		reason msgpackcheck.Reason
		offset int
		header string
	}{
		{"empty", nil, msgpackcheck.Truncated, 0, ""},
		{"issue bin32 command", mptest.IssueFrames()[0].Bytes, msgpackcheck.TooLong, 1, "bin32"},
		{"issue str32 in kwargs", mptest.IssueFrames()[1].Bytes, msgpackcheck.TooLong, 22, "str32"},
		{"str32 4 GB", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, msgpackcheck.TooLong, 0, "str32"},
		{"bin8 one short", []byte{0xc4, 3, 1, 2}, msgpackcheck.TooLong, 0, "bin8"},
		{"fixstr one short", []byte{0xa3, 'a', 'b'}, msgpackcheck.TooLong, 0, "fixstr"},
		{"ext8 without type", []byte{0xc7, 0}, msgpackcheck.TooLong, 0, "ext8"},
		{"ext16 one short", []byte{0xc8, 0, 2, 1, 0}, msgpackcheck.TooLong, 0, "ext16"},
		{"array32 4G elements", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}, msgpackcheck.TooLong, 0, "array32"},
		{"array16 more than bytes", []byte{0xdc, 0, 3, 0xc0, 0xc0}, msgpackcheck.TooLong, 0, "array16"},
		{"map16 needs two bytes an entry", []byte{0xde, 0, 2, 0xc0, 0xc0, 0xc0}, msgpackcheck.TooLong, 0, "map16"},
		{"nested map32", []byte{0x91, 0x91, 0xdf, 0x7f, 0, 0, 0, 0xc0, 0xc0}, msgpackcheck.TooLong, 2, "map32"},
		{"fixarray missing values", []byte{0x92, 0xa1, 'a'}, msgpackcheck.Truncated, 0, "fixarray"},
		{"inner array missing values", []byte{0x91, 0x92, 0xa1, 'a'}, msgpackcheck.Truncated, 1, "fixarray"},
		{"uint32 cut", []byte{0xce, 0, 0}, msgpackcheck.Truncated, 0, "uint32"},
		{"bin16 length cut", []byte{0xc5, 0}, msgpackcheck.Truncated, 0, "bin16"},
		{"fixext16 cut", []byte{0xd8, 1, 0}, msgpackcheck.Truncated, 0, "fixext16"},
		{"0xc1", []byte{0x92, 0xa1, 'a', 0xc1}, msgpackcheck.InvalidCode, 3, "never used"},
		{"trailing", []byte{0xc0, 0xc0}, msgpackcheck.Trailing, 1, ""},
		{"too deep", mptest.Deep(msgpackcheck.MaxDepth + 1), msgpackcheck.TooDeep, msgpackcheck.MaxDepth, "fixarray"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := msgpackcheck.Check(c.in)
			var e *msgpackcheck.Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(% x) = %v, want an *Error", c.in, err)
			}
			if e.Reason != c.reason || e.Offset != c.offset || e.Header != c.header {
				t.Errorf("Check(% x) = %+v, want reason %v at offset %d header %q", c.in, e, c.reason, c.offset, c.header)
			}
			if c.header != "" && c.header != "never used" && !strings.Contains(err.Error(), c.header) {
				t.Errorf("message %q does not name the header %s", err, c.header)
			}
			t.Log(err)
		})
	}
}

// TestCheckRejectsEveryHostileFrame: every frame the tests send to live
// servers is rejected by Check itself.
func TestCheckRejectsEveryHostileFrame(t *testing.T) {
	frames := append(mptest.Requests(), mptest.InMaps("obs", "data")...)
	for _, f := range frames {
		if err := msgpackcheck.Check(f.Bytes); err == nil {
			t.Errorf("%s (% x): accepted", f.Name, f.Bytes)
		}
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	b := mptest.Marshal(t, []any{"echo", map[string]any{"a": []any{1, "x", []byte{1, 2}, map[string]any{"b": nil}}}})
	if n := testing.AllocsPerRun(100, func() {
		if msgpackcheck.Check(b) != nil {
			t.Fatal("rejected")
		}
	}); n != 0 {
		t.Errorf("Check allocates %.1f times per call", n)
	}
}

// FuzzCheck: whatever Check accepts, the library skips exactly, and a
// rejection names an offset inside the input.
func FuzzCheck(f *testing.F) {
	for _, fr := range append(mptest.Requests(), mptest.InMaps("obs")...) {
		f.Add(fr.Bytes)
	}
	f.Add(mptest.Marshal(f, []any{"ping", map[string]any{}}))
	f.Add(mptest.Marshal(f, []any{"echo", map[string]any{"msg": "hello", "n": []any{1, 2.5, nil, true}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := msgpackcheck.Check(b)
		if err != nil {
			var e *msgpackcheck.Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(b) {
				t.Fatalf("Check(% x) = %v", b, err)
			}
			return
		}
		r := bytes.NewReader(b)
		dec := msgpack.NewDecoder(r)
		if err := dec.Skip(); err != nil {
			t.Fatalf("Check accepted % x, Skip: %v", b, err)
		}
		if r.Len() != 0 {
			t.Fatalf("Check accepted % x, Skip left %d bytes", b, r.Len())
		}
	})
}
