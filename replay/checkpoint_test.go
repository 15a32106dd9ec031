package replay

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/distrl/distrl/internal/ckptfile"
)

func filledTable(t *testing.T, name string, n int) *Table {
	t.Helper()
	tb := mustTable(t, Options{Name: name, MaxSize: 50, Sampler: Prioritized, Remover: RemoveLowestPriority,
		Alpha: 0.6, Beta: 0.4, MaxTimesSampled: 3, Limiter: Limiter{MinSize: 5, SamplesPerInsert: 2, ErrorBuffer: 1000}, FirstID: 1000})
	for i := range n {
		if _, err := tb.TryInsert(float64(i%9), []byte{byte(i), 1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.TrySample(20); err != nil {
		t.Fatal(err)
	}
	return tb
}

// A table written and restored has the same items, order, counters and
// next id, and goes on working.
func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tb := filledTable(t, "main", 70)
	if _, err := tb.WriteCheckpoint(dir, 1, 3); err != nil {
		t.Fatal(err)
	}
	back, n, err := LoadNewestCheckpoint(dir, "main", nil)
	if err != nil || n != 1 {
		t.Fatalf("load: %v (n %d)", err, n)
	}
	if a, b := tb.Snapshot(), back.Snapshot(); !reflect.DeepEqual(a, b) {
		t.Fatalf("restored state differs:\n%+v\n%+v", a, b)
	}
	id1, _ := tb.TryInsert(1, nil)
	id2, _ := back.TryInsert(1, nil)
	if id1 != id2 {
		t.Fatalf("next ids %d and %d", id1, id2)
	}
	if _, err := back.TrySample(4); err != nil {
		t.Fatal(err)
	}
}

// A corrupt newest checkpoint is skipped for the one before; another
// table's files are never loaded; a directory of only corrupt files is
// ErrNoCheckpoint.
func TestCheckpointCorruptNewest(t *testing.T) {
	dir := t.TempDir()
	old := filledTable(t, "main", 30)
	if _, err := old.WriteCheckpoint(dir, 1, 3); err != nil {
		t.Fatal(err)
	}
	newer := filledTable(t, "main", 60)
	path, err := newer.WriteCheckpoint(dir, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	other := filledTable(t, "main2", 10)
	if _, err := other.WriteCheckpoint(dir, 9, 3); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[len(b)-3] ^= 0xff
	os.WriteFile(path, b, 0o644)

	back, n, err := LoadNewestCheckpoint(dir, "main", nil)
	if err != nil || n != 1 {
		t.Fatalf("load: %v (n %d), want checkpoint 1", err, n)
	}
	if back.Counters().Inserts != 30 {
		t.Fatalf("loaded %+v", back.Counters())
	}
	os.WriteFile(filepath.Join(dir, ckptfile.Name(checkpointPrefix("main"), 1)), []byte("junk"), 0o644)
	if _, _, err := LoadNewestCheckpoint(dir, "main", nil); !errors.Is(err, ErrNoCheckpoint) || !errors.Is(err, ckptfile.ErrCorrupt) {
		t.Fatalf("all corrupt: %v", err)
	}
}

// Restore refuses states that do not hold together.
func TestRestoreRefusesBadState(t *testing.T) {
	good := filledTable(t, "t", 10).Snapshot()
	for _, tt := range []struct {
		name string
		edit func(*State)
	}{
		{"duplicate id", func(s *State) { s.Items[1].ID = s.Items[0].ID }},
		{"id past next", func(s *State) { s.Items[0].ID = s.NextID }},
		{"bad priority", func(s *State) { s.Items[0].Priority = -1 }},
		{"too many", func(s *State) { s.Options.MaxSize = 2 }},
		{"bad options", func(s *State) { s.Options.Sampler = "x" }},
		{"negative counter", func(s *State) { s.Counters.Inserts = -1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := *good
			st.Items = append([]ItemState(nil), good.Items...)
			tt.edit(&st)
			if _, err := Restore(&st); !errors.Is(err, ErrBadState) {
				t.Fatalf("got %v, want ErrBadState", err)
			}
		})
	}
}
