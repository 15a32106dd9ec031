package ckptfile_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/distrl/distrl/internal/ckptfile"
	"github.com/vmihailenco/msgpack/v5"
)

func TestDecodeRefusesDamage(t *testing.T) {
	payload, _ := msgpack.Marshal(map[string]int{"a": 1})
	good := ckptfile.Encode(payload)
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short header", good[:10]},
		{"bad magic", append([]byte("XXXXXXXX"), good[8:]...)},
		{"truncated", good[:len(good)-1]},
		{"padded", append(slices.Clone(good), 0)},
		{"flipped bit", func() []byte { b := slices.Clone(good); b[len(b)-1] ^= 1; return b }()},
		{"not msgpack", ckptfile.Encode([]byte{0xc1})},
		{"hostile length", ckptfile.Encode([]byte{0xdb, 0xff, 0xff, 0xff, 0xff})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ckptfile.Decode(tt.data); !errors.Is(err, ckptfile.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
	if p, err := ckptfile.Decode(good); err != nil || !slices.Equal(p, payload) {
		t.Fatalf("good file: %v", err)
	}
}

// Write, list newest first, load skipping a corrupt newest file, prune
// old files and leftover temporaries; other prefixes untouched.
func TestWriteLoadPrune(t *testing.T) {
	dir := t.TempDir()
	for n := range int64(5) {
		p, _ := msgpack.Marshal(n)
		if _, err := ckptfile.Write(dir, "a-", n, p); err != nil {
			t.Fatal(err)
		}
	}
	other, _ := msgpack.Marshal("other")
	ckptfile.Write(dir, "b-", 99, other)
	os.WriteFile(filepath.Join(dir, ".a-123.tmp"), []byte("partial"), 0o644)
	os.WriteFile(filepath.Join(dir, ckptfile.Name("a-", 4)), []byte("cut short"), 0o644)

	var got int64
	f, err := ckptfile.LoadNewest(dir, "a-", nil, func(_ ckptfile.File, p []byte) error {
		return msgpack.Unmarshal(p, &got)
	})
	if err != nil || f.N != 3 || got != 3 {
		t.Fatalf("LoadNewest: %v, file %+v, value %d; want 3", err, f, got)
	}
	if err := ckptfile.Prune(dir, "a-", 2); err != nil {
		t.Fatal(err)
	}
	files, _ := ckptfile.List(dir, "a-")
	var ns []int64
	for _, f := range files {
		ns = append(ns, f.N)
	}
	if !slices.Equal(ns, []int64{4, 3}) {
		t.Fatalf("after prune: %v", ns)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".a-*.tmp")); len(m) != 0 {
		t.Fatalf("temporaries left: %v", m)
	}
	if b, _ := ckptfile.List(dir, "b-"); len(b) != 1 {
		t.Fatalf("other prefix: %v", b)
	}
	empty := t.TempDir()
	if _, err := ckptfile.LoadNewest(empty, "a-", nil, func(ckptfile.File, []byte) error { return nil }); !errors.Is(err, ckptfile.ErrNone) {
		t.Fatalf("empty dir: %v", err)
	}
}

// A streamed checkpoint is the same file, byte for byte, as one written
// from a buffer, written in pieces of every size; an encoder that fails
// leaves no file and no temporary behind.
func TestWriteStream(t *testing.T) {
	payload, _ := msgpack.Marshal(bytes.Repeat([]byte("distrl "), 300_000)) // 2.1 MB: several buffer flushes
	dir := t.TempDir()
	whole, err := ckptfile.Write(dir, "w-", 1, payload)
	if err != nil {
		t.Fatal(err)
	}
	for _, piece := range []int{1, 7, 4096, 1 << 20, len(payload)} {
		path, err := ckptfile.WriteStream(dir, "s-", int64(piece), func(w io.Writer) error {
			for rest := payload; len(rest) > 0; {
				k := min(piece, len(rest))
				if _, err := w.Write(rest[:k]); err != nil {
					return err
				}
				rest = rest[k:]
			}
			return nil
		})
		if err != nil {
			t.Fatalf("pieces of %d: %v", piece, err)
		}
		a, _ := os.ReadFile(whole)
		b, _ := os.ReadFile(path)
		if !bytes.Equal(a, b) {
			t.Fatalf("pieces of %d: streamed file differs from the buffered one (%d vs %d bytes)", piece, len(b), len(a))
		}
		if p, err := ckptfile.Read(path); err != nil || !bytes.Equal(p, payload) {
			t.Fatalf("pieces of %d: read back: %v", piece, err)
		}
	}

	boom := errors.New("boom")
	_, err = ckptfile.WriteStream(dir, "f-", 1, func(w io.Writer) error {
		w.Write(payload[:1000])
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing encoder: %v, want it wrapped", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*f-*")); len(m) != 0 {
		t.Fatalf("failing encoder left %v", m)
	}
}
