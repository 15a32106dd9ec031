package rpc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeRequest(t *testing.T) {
	emptyMap := []byte{0x80}
	tests := []struct {
		name    string
		kwargs  any
		want    []byte // encoded kwargs; nil when an error is expected
		wantErr bool
	}{
		{"nil", nil, emptyMap, false},
		{"nil map", map[string]int(nil), emptyMap, false},
		{"nil struct pointer", (*addArgs)(nil), emptyMap, false},
		{"empty raw", msgpack.RawMessage(nil), emptyMap, false},
		{"struct", addArgs{A: 1, B: 2}, []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'b', 0x02}, false},
		{"map", map[string]int{"a": 1}, []byte{0x81, 0xa1, 'a', 0x01}, false},
		{"raw map", msgpack.RawMessage{0x81, 0xa1, 'a', 0x01}, []byte{0x81, 0xa1, 'a', 0x01}, false},
		{"int", 5, nil, true},
		{"slice", []int{1}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := getEncoder()
			defer putEncoder(e)
			err := encodeRequest(e, "", "cmd", tt.kwargs)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("encodeRequest succeeded, want error")
				}
				return
			}
			if err != nil {
				t.Fatalf("encodeRequest: %v", err)
			}
			want := append([]byte{0x92, 0xa3, 'c', 'm', 'd'}, tt.want...)
			if !bytes.Equal(e.buf.Bytes(), want) {
				t.Errorf("encoded % x, want % x", e.buf.Bytes(), want)
			}
			req, rerr := decodeRequest(e.buf.Bytes())
			if rerr != nil || req.command != "cmd" || req.target != "" || !bytes.Equal(req.args.Raw(), tt.want) {
				t.Errorf("decodeRequest = %+v, %v", req, rerr)
			}
		})
	}
}

// TestRequestTarget: a request may name its worker as a third element, a
// string or nil; anything else there is a bad_request.
func TestRequestTarget(t *testing.T) {
	e := getEncoder()
	defer putEncoder(e)
	if err := encodeRequest(e, "echo/3", "ping", nil); err != nil {
		t.Fatal(err)
	}
	want := []byte{0x93, 0xa4, 'p', 'i', 'n', 'g', 0x80, 0xa6, 'e', 'c', 'h', 'o', '/', '3'}
	if !bytes.Equal(e.buf.Bytes(), want) {
		t.Fatalf("encoded % x, want % x", e.buf.Bytes(), want)
	}
	tests := []struct {
		name    string
		payload []byte
		target  string
		wantErr bool
	}{
		{"named", want, "echo/3", false},
		{"nil target", []byte{0x93, 0xa1, 'x', 0x80, 0xc0}, "", false},
		{"int target", []byte{0x93, 0xa1, 'x', 0x80, 0x07}, "", true},
		{"map target", []byte{0x93, 0xa1, 'x', 0x80, 0x80}, "", true},
		{"four elements", []byte{0x94, 0xa1, 'x', 0x80, 0xc0, 0xc0}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, rerr := decodeRequest(tt.payload)
			if tt.wantErr {
				if rerr == nil || rerr.Type != ErrTypeBadRequest {
					t.Fatalf("decodeRequest = %+v, %v; want a bad_request", req, rerr)
				}
				return
			}
			if rerr != nil || req.target != tt.target {
				t.Fatalf("decodeRequest = %+v, %v; want target %q", req, rerr, tt.target)
			}
		})
	}
}

func TestArgsDecode(t *testing.T) {
	tests := []struct {
		name    string
		raw     []byte
		want    addArgs
		wantErr bool
	}{
		{"absent", nil, addArgs{A: 7}, false},
		{"nil", []byte{0xc0}, addArgs{A: 7}, false},
		{"empty map", []byte{0x80}, addArgs{A: 7}, false},
		{"fields", mustMarshal(t, map[string]int{"a": 1, "b": 2}), addArgs{A: 1, B: 2}, false},
		{"unknown field", mustMarshal(t, map[string]int{"b": 2, "c": 3}), addArgs{}, true},
		{"not a map", mustMarshal(t, "name"), addArgs{}, true},
		{"wrong type", mustMarshal(t, map[string]string{"a": "x"}), addArgs{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := addArgs{A: 7} // a default the kwargs may override
			err := RawArgs(tt.raw).Decode(&got)
			if tt.wantErr {
				if !errors.Is(err, ErrBadArguments) {
					t.Fatalf("Decode error = %v, want bad_arguments", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Decode = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestDecodeReply(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		wantSum int
		wantErr error
	}{
		{"ok", mustMarshal(t, map[string]any{"ok": map[string]int{"sum": 3}}), 3, nil},
		{"nil ok", mustMarshal(t, map[string]any{"ok": nil}), 0, nil},
		{"error", mustMarshal(t, map[string]any{"error": map[string]string{"type": "unknown_command", "message": "x"}}), 0, ErrUnknownCommand},
		{"untyped error", mustMarshal(t, map[string]any{"error": map[string]string{"message": "x"}}), 0, errMalformedReply},
		{"neither", mustMarshal(t, map[string]any{"other": 1}), 0, errMalformedReply},
		{"garbage", []byte{0xc1}, 0, errMalformedReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := addReply{Sum: -1}
			err := decodeReply(tt.payload, &r)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("decodeReply error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || r.Sum != tt.wantSum {
				t.Errorf("decodeReply = %+v, %v; want sum %d", r, err, tt.wantSum)
			}
		})
	}
}
