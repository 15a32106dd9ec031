package controller

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
)

// ClearRecords leaves a trial's kept versions and nothing else of it, and
// nothing of another trial's.
func TestClearRecordsKeepsVersions(t *testing.T) {
	ctx := context.Background()
	repo := nameresolve.NewMemory()
	defer repo.Close()
	trial, other := names.NewTrial("e", "t1"), names.NewTrial("e", "t2")
	keys := []string{
		trial.Worker("actor/0"), trial.Status("actor/0"), trial.Loop("actor/0"), trial.Params("red"),
		trial.Prefix() + "ctl", trial.Prefix() + "v", trial.Prefix() + "vx/y",
		trial.Versions("red") + "000000000001", trial.Versions("red") + "000000000001/tag/pool",
		other.Worker("actor/0"),
	}
	for _, k := range keys {
		if err := repo.Add(ctx, k, "x", nameresolve.AddOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ClearRecords(ctx, repo, trial); err != nil {
		t.Fatal(err)
	}
	left, err := repo.Find(ctx, names.DefaultRoot)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range left {
		got = append(got, e.Key)
	}
	want := []string{other.Worker("actor/0"), trial.Versions("red") + "000000000001", trial.Versions("red") + "000000000001/tag/pool"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
}

// A run's kept versions are saved at its end and restored by a run on a
// fresh name server; one that still has them keeps its own.
func TestVersionsSavedAndRestored(t *testing.T) {
	ctx := context.Background()
	trial := names.NewTrial("e", "t1")
	path := filepath.Join(t.TempDir(), VersionsFile)
	old := nameresolve.NewMemory()
	defer old.Close()
	recs := map[string]string{
		trial.Versions("red") + "000000000010":                  `{"version":10}`,
		trial.Versions("red") + "000000000010/tag/best":         "1",
		trial.Versions("red") + "000000000010/meta/eval_return": "0.5",
	}
	for k, v := range recs {
		if err := old.Add(ctx, k, v, nameresolve.AddOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := saveVersions(ctx, old, trial, path); err != nil {
		t.Fatal(err)
	}
	fresh := nameresolve.NewMemory()
	defer fresh.Close()
	if n, err := restoreVersions(ctx, fresh, trial, path); err != nil || n != 3 {
		t.Fatalf("restore = %d, %v; want 3 records", n, err)
	}
	for k, v := range recs {
		if got, err := fresh.Get(ctx, k); err != nil || got != v {
			t.Errorf("%s = %q, %v; want %q", k, got, err, v)
		}
	}
	if err := fresh.Add(ctx, trial.Versions("red")+"000000000010/tag/best", "2", nameresolve.AddOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if n, err := restoreVersions(ctx, fresh, trial, path); err != nil || n != 0 {
		t.Errorf("restore onto a name server that has versions = %d, %v; want none", n, err)
	}
	if n, err := restoreVersions(ctx, fresh, trial, filepath.Join(t.TempDir(), "none.json")); err != nil || n != 0 {
		t.Errorf("restore without a file = %d, %v", n, err)
	}
}
