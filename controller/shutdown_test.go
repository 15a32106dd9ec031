package controller

import (
	"context"
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
