package paramstream_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/paramstream"
)

// Kept versions on a real etcd: tags, metadata, selection, collection,
// and a second client (a restarted worker) sees the same.
func TestVersionsKeepTagCollect(t *testing.T) {
	ctx := ctxT(t)
	trial := names.NewTrial("versions", t.Name())
	dir := t.TempDir()
	vs := paramstream.NewVersions(etcdtest.Repo(t), trial)
	for v := int64(1); v <= 6; v++ {
		if _, err := vs.Keep(ctx, "red", v, 77, dir, paramsFor(v, 100), "pool"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := vs.Keep(ctx, "blue", 1, 78, t.TempDir(), paramsFor(1, 10), "pool"); err != nil {
		t.Fatal(err)
	}
	if err := vs.Tag(ctx, "red", 3, "best"); err != nil {
		t.Fatal(err)
	}
	if err := vs.SetMetadata(ctx, "red", 3, map[string]any{"win_rate": 0.75, "games": 200}); err != nil {
		t.Fatal(err)
	}
	if err := vs.Tag(ctx, "red", 9, "best"); !errors.Is(err, paramstream.ErrNoVersion) {
		t.Errorf("tagging a version not kept: %v, want ErrNoVersion", err)
	}
	if err := vs.Tag(ctx, "red", 3, "42"); err == nil {
		t.Error("a numeric tag was taken")
	}

	// Another client, as a restarted worker would open.
	again := paramstream.NewVersions(etcdtest.Repo(t), trial)
	list, err := again.List(ctx, "red")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 6 || list[0].Version != 1 || list[5].Version != 6 {
		t.Fatalf("List = %+v, want versions 1 to 6", list)
	}
	v3 := list[2]
	if !slices.Equal(v3.Tags, []string{"best", "pool"}) || v3.Metadata["win_rate"] != 0.75 || v3.Metadata["games"] != 200.0 {
		t.Errorf("version 3: tags %v metadata %v", v3.Tags, v3.Metadata)
	}
	if ps, err := again.Policies(ctx); err != nil || !slices.Equal(ps, []string{"blue", "red"}) {
		t.Errorf("Policies = %v, %v", ps, err)
	}
	for id, want := range map[string]int64{"best": 3, "5": 5, "pool": 6} {
		got, err := paramstream.Select(list, id)
		if err != nil || got.Version != want {
			t.Errorf("Select(%q) = version %d, %v; want %d", id, got.Version, err, want)
		}
	}
	for _, id := range []string{"never", "99"} {
		if _, err := paramstream.Select(list, id); !errors.Is(err, paramstream.ErrNoVersion) {
			t.Errorf("Select(%q): %v, want ErrNoVersion", id, err)
		}
	}
	data, err := paramstream.Load(v3)
	if err != nil || !slices.Equal(data, paramsFor(3, 100)) {
		t.Fatalf("Load(version 3): %v", err)
	}

	// Keep the pool tag on the newest 2: 3 keeps "best", 4 loses its only
	// tag, so 1, 2 and 4 go, files included.
	removed, err := vs.Collect(ctx, "red", "pool", 2)
	if err != nil || removed != 3 {
		t.Fatalf("Collect = %d, %v; want 3 removed", removed, err)
	}
	list, _ = vs.List(ctx, "red")
	var kept []int64
	for _, v := range list {
		kept = append(kept, v.Version)
	}
	if !slices.Equal(kept, []int64{3, 5, 6}) || list[0].HasTag("pool") {
		t.Errorf("after Collect: %+v, want 3 (best only), 5 and 6", list)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files left in the versions directory, want 3", len(entries))
	}

	// A damaged file is refused, not served.
	if err := os.WriteFile(list[1].Path, []byte("not parameters"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := paramstream.Load(list[1]); err == nil {
		t.Error("a damaged version file loaded")
	}
}

func TestCheckTag(t *testing.T) {
	for tag, ok := range map[string]bool{
		"pool": true, "latest": false, "12": false, "-3": false, "": false, "a/b": false, "a b": false,
		"best": true, "eval-7": true, "v1.2": true, "_x": true,
	} {
		if err := paramstream.CheckTag(tag); (err == nil) != ok {
			t.Errorf("CheckTag(%q) = %v, want ok %v", tag, err, ok)
		}
	}
}

// Drawn 1000 times, a pool's 4 members come up as often as each other: a
// chi-square test with 3 degrees of freedom at p = 0.001 (16.27). A draw
// that skipped a member, or favoured the newest, fails it by hundreds.
func TestPoolDrawUniform(t *testing.T) {
	var vs []paramstream.Version
	for v := int64(1); v <= 9; v++ {
		tags := []string{"pool"}
		if v%2 == 0 {
			tags = []string{"other"}
		}
		vs = append(vs, paramstream.Version{Version: v, Tags: tags})
	}
	pool := paramstream.PoolSpec{Tag: "pool", Last: 4}
	members := pool.Members(vs)
	var got []int64
	for _, m := range members {
		got = append(got, m.Version)
	}
	if !slices.Equal(got, []int64{3, 5, 7, 9}) {
		t.Fatalf("members %v, want the newest 4 tagged pool: 3 5 7 9", got)
	}
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 1))
		counts := map[int64]int{}
		const n = 1000
		for range n {
			v, err := pool.Draw(vs, rng)
			if err != nil {
				t.Fatal(err)
			}
			counts[v.Version]++
		}
		chi2 := 0.0
		for _, v := range got {
			d := float64(counts[v]) - n/4.0
			chi2 += d * d / (n / 4.0)
		}
		if len(counts) != 4 || chi2 > 16.27 {
			t.Errorf("seed %d: counts %v, chi-square %.2f, above 16.27 (df 3, p = 0.001)", seed, counts, chi2)
		}
	}
	if _, err := (paramstream.PoolSpec{Tag: "none", Last: 3}).Draw(vs, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, paramstream.ErrNoVersion) {
		t.Errorf("draw from an empty pool: %v, want ErrNoVersion", err)
	}
}
