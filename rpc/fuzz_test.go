package rpc

import (
	"testing"

	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
)

func seedValues(f *testing.F, vs ...any) {
	for _, v := range vs {
		f.Add(mustMarshal(f, v))
	}
}

// FuzzDecodeRequest: any payload decodes or gets a bad_request, within an
// allocation bound set by its size, whatever its headers claim.
func FuzzDecodeRequest(f *testing.F) {
	mptest.Seed(f, mptest.Requests())
	seedValues(f, []any{"ping", map[string]any{}}, []any{"configure", nil},
		[]any{"echo", map[string]any{"msg": "hi", "n": []any{1, 2.5, nil, []byte{1}}}},
		[]any{"ping", map[string]any{}, "echo/3"}, []any{"ping", nil, nil}, []any{"ping", nil, 7})
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			req, rerr := decodeRequest(in)
			if rerr != nil {
				if rerr.Type != ErrTypeBadRequest {
					t.Fatalf("% x: %v, want a bad_request", in, rerr)
				}
				return
			}
			if len(req.command) > MaxCommandLen {
				t.Fatalf("accepted a command of %d bytes", len(req.command))
			}
			var kwargs map[string]any
			_ = req.args.Decode(&kwargs)
		})
	})
}

// FuzzDecodeReply: any reply decodes or fails, within an allocation bound
// set by its size.
func FuzzDecodeReply(f *testing.F) {
	mptest.Seed(f, mptest.Values(), mptest.InMaps("ok", "error"))
	seedValues(f, map[string]any{"ok": "pong"}, map[string]any{"ok": nil},
		map[string]any{"ok": map[string]any{"a": []any{1, "b"}}},
		map[string]any{"error": map[string]any{"type": "bad_request", "message": "no"}})
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			var v any
			_ = decodeReply(in, &v)
		})
	})
}
