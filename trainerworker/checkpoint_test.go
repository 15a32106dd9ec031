package trainerworker_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/trainerworker"
)

func testCheckpoint(v int64) *trainerworker.Checkpoint {
	return &trainerworker.Checkpoint{
		Version: v,
		Learner: ppo.LearnerState{
			Params: []float32{float32(v), 1, 2}, AdamM: []float32{0, 0, 0}, AdamV: []float32{0, 0, 0},
			AdamStep: 4 * v, Updates: v,
		},
		Samples: 1000 * v, Updates: v, Episodes: 10 * v, ConfigHash: "abc", Policy: "default",
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := testCheckpoint(42)
	path, err := trainerworker.WriteCheckpoint(dir, want)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "ckpt-0000000042.ckpt" {
		t.Errorf("written to %s", path)
	}
	got, err := trainerworker.ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 42 || !slices.Equal(got.Learner.Params, want.Learner.Params) ||
		got.Samples != want.Samples || got.Episodes != want.Episodes || got.ConfigHash != "abc" {
		t.Errorf("read back %+v, wrote %+v", got, want)
	}
}

func TestDecodeCheckpointRejects(t *testing.T) {
	good, err := trainerworker.EncodeCheckpoint(testCheckpoint(1))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"header only", good[:24]},
		{"short header", good[:10]},
		{"truncated payload", good[:len(good)-1]},
		{"trailing bytes", append(slices.Clone(good), 0)},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"future format", edit(func(b []byte) []byte { b[8] = 9; return b })},
		{"payload bit flip", edit(func(b []byte) []byte { b[30] ^= 1; return b })},
		{"crc bit flip", edit(func(b []byte) []byte { b[12] ^= 1; return b })},
		{"huge length", edit(func(b []byte) []byte { b[23] = 0x7f; return b })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := trainerworker.DecodeCheckpoint(tt.data); !errors.Is(err, trainerworker.ErrCorruptCheckpoint) {
				t.Errorf("got %v, want ErrCorruptCheckpoint", err)
			}
		})
	}
}

// LoadNewestCheckpoint over directory states a crash or damage can leave.
func TestLoadNewestCheckpoint(t *testing.T) {
	write := func(t *testing.T, dir string, v int64) string {
		t.Helper()
		p, err := trainerworker.WriteCheckpoint(dir, testCheckpoint(v))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  int64 // -1: ErrNoCheckpoint
	}{
		{"empty dir", func(*testing.T, string) {}, -1},
		{"missing dir", func(t *testing.T, dir string) { os.Remove(dir) }, -1},
		{"newest wins", func(t *testing.T, dir string) {
			write(t, dir, 1)
			write(t, dir, 10)
			write(t, dir, 2)
		}, 10},
		{"corrupt newest: previous used", func(t *testing.T, dir string) {
			write(t, dir, 1)
			p := write(t, dir, 2)
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 0xff
			os.WriteFile(p, b, 0o644)
		}, 1},
		{"truncated newest: previous used", func(t *testing.T, dir string) {
			write(t, dir, 4)
			p := write(t, dir, 5)
			os.Truncate(p, 30)
		}, 4},
		{"two bad newest", func(t *testing.T, dir string) {
			write(t, dir, 4)
			os.WriteFile(filepath.Join(dir, trainerworker.CheckpointName(5)), []byte("junk"), 0o644)
			os.WriteFile(filepath.Join(dir, trainerworker.CheckpointName(6)), nil, 0o644)
		}, 4},
		{"all corrupt", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, trainerworker.CheckpointName(5)), []byte("junk"), 0o644)
		}, -1},
		{"temp file of a crashed write ignored", func(t *testing.T, dir string) {
			write(t, dir, 3)
			good, _ := trainerworker.EncodeCheckpoint(testCheckpoint(9))
			os.WriteFile(filepath.Join(dir, ".ckpt-123456.tmp"), good[:len(good)/2], 0o644)
		}, 3},
		{"file renamed to another version", func(t *testing.T, dir string) {
			write(t, dir, 3)
			p := write(t, dir, 7)
			os.Rename(p, filepath.Join(dir, trainerworker.CheckpointName(8)))
		}, 3},
		{"other files ignored", func(t *testing.T, dir string) {
			write(t, dir, 2)
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)
			os.WriteFile(filepath.Join(dir, "ckpt-9.ckpt"), []byte("short name"), 0o644)
			os.Mkdir(filepath.Join(dir, trainerworker.CheckpointName(99)), 0o755)
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, dir)
			c, path, err := trainerworker.LoadNewestCheckpoint(dir, nil)
			if tt.want < 0 {
				if !errors.Is(err, trainerworker.ErrNoCheckpoint) {
					t.Fatalf("got %v (%v), want ErrNoCheckpoint", c, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tt.want || filepath.Base(path) != trainerworker.CheckpointName(tt.want) {
				t.Fatalf("loaded version %d from %s, want %d", c.Version, path, tt.want)
			}
		})
	}
}

// withHeader is a checkpoint file of payload with a valid header (magic,
// format, CRC and length), so that the payload reaches the decoder.
func withHeader(t testing.TB, payload []byte) []byte {
	good, err := trainerworker.EncodeCheckpoint(testCheckpoint(1))
	if err != nil {
		t.Fatal(err)
	}
	b := slices.Clone(good[:12])
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

// FuzzDecodeCheckpoint: a payload with a valid header and CRC (a crafted
// file, not a damaged one) decodes or fails within an allocation bound set
// by its size, whatever its headers claim.
func FuzzDecodeCheckpoint(f *testing.F) {
	good, err := trainerworker.EncodeCheckpoint(testCheckpoint(3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[24:])
	mptest.Seed(f, mptest.Values(), mptest.InMaps("learner", "config_hash", "policy"),
		[]mptest.Frame{{Name: "params", Bytes: mptest.Map1("learner", mptest.Map1("params", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0}))}})
	f.Fuzz(func(t *testing.T, payload []byte) {
		file := withHeader(t, payload)
		mptest.BoundedAlloc(t, file, func() {
			if _, err := trainerworker.DecodeCheckpoint(file); err != nil && !errors.Is(err, trainerworker.ErrCorruptCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
		})
	})
}
