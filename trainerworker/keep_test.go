package trainerworker_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/trainerworker"
)

// With keep_every 2 a trainer keeps every second version (0 included)
// tagged pool in
// its checkpoint directory's versions/, the newest keep_last of them: an
// older one loses the tag and, with no tag left, goes, file and all. A
// kept version's parameters are those it published.
func TestKeepsVersions(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"batch_steps": 20, "checkpoint_dir": dir, "keep_every": 2, "keep_last": 2})
	prod := newProducer(t, c.repo)
	sub := newSubscriber(t, c.repo)
	rng := rand.New(rand.NewPCG(9, 10))
	var published [][]float32
	for v := range int64(6) {
		prod.post(t, cartPoleBatch(rng, 20, v))
		p := fetchVersion(t, sub, v+1)
		published = append(published, p.Data)
	}
	vs := paramstream.NewVersions(c.repo, testTrial)
	eventually.NoError(t, 10*time.Second, "versions 4 and 6 kept", func() error {
		list, err := vs.List(t.Context(), trainerworker.DefaultPolicy)
		if err != nil {
			return err
		}
		var kept []int64
		for _, v := range list {
			kept = append(kept, v.Version)
		}
		if !slices.Equal(kept, []int64{4, 6}) {
			return fmt.Errorf("kept %v", kept)
		}
		return nil
	})
	list, _ := vs.List(t.Context(), trainerworker.DefaultPolicy)
	for _, v := range list {
		data, err := paramstream.Load(v)
		if err != nil || !slices.Equal(data, published[v.Version-1]) || !v.HasTag("pool") {
			t.Errorf("kept version %d: tags %v, %v; want the published parameters tagged pool", v.Version, v.Tags, err)
		}
		if filepath.Dir(v.Path) != filepath.Join(dir, trainerworker.VersionsDir) {
			t.Errorf("kept version %d at %s, want it in %s", v.Version, v.Path, filepath.Join(dir, trainerworker.VersionsDir))
		}
	}
	var st map[string]any
	c.request(t, tr.Name(), "stats", nil, &st)
	if got := fmt.Sprint(st["kept_version"], st["versions_kept"], st["versions_collected"]); got != "6 4 2" {
		t.Errorf("stats kept_version %v versions_kept %v versions_collected %v, want 6, 4 (0, 2, 4, 6), 2", st["kept_version"], st["versions_kept"], st["versions_collected"])
	}
}
