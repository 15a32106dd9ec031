package trainerworker

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/worker"
)

// Defaults of KeepConfig.
const (
	DefaultKeepTag  = "pool"
	DefaultKeepLast = 20
	// keepTimeout bounds the name-resolve writes of one kept version.
	keepTimeout = 5 * time.Second
	// VersionsDir is where, under its checkpoint directory, a trainer
	// keeps versions' parameter files.
	VersionsDir = "versions"
)

// KeepConfig sets versions aside in the parameter service's kept versions
// (paramstream.Versions): an opponent pool for self-play, versions to
// evaluate. Both learners share it.
type KeepConfig struct {
	// KeepEvery keeps every that many'th published version, tagged
	// KeepTag; 0 (the default) keeps none. Needs checkpoint_dir: the
	// files go to its versions/ directory.
	KeepEvery int `msgpack:"keep_every"`
	// KeepEverySeconds keeps a published version once that many seconds
	// have passed since the last one kept (SRL's tag frequency in
	// minutes); 0: by count only. With both, a version due by either is
	// kept.
	KeepEverySeconds float64 `msgpack:"keep_every_s"`
	// KeepTag tags the versions kept; default "pool".
	KeepTag string `msgpack:"keep_tag"`
	// KeepLast is how many versions keep KeepTag: older ones lose it, and
	// a version left without any tag (no evaluation's, no "best") is
	// removed, file and all. Default 20.
	KeepLast int `msgpack:"keep_last"`
}

// check fills in the defaults and checks c for a trainer whose checkpoint
// directory is dir.
func (c *KeepConfig) check(dir string) error {
	c.KeepTag = cmp.Or(c.KeepTag, DefaultKeepTag)
	c.KeepLast = cmp.Or(c.KeepLast, DefaultKeepLast)
	switch {
	case c.KeepEvery < 0 || c.KeepLast < 1 || !(c.KeepEverySeconds >= 0):
		return badConfig("keep_every %d, keep_every_s %v, keep_last %d: want keep_every >= 0 and keep_every_s >= 0 (0: keep none) and keep_last >= 1",
			c.KeepEvery, c.KeepEverySeconds, c.KeepLast)
	case c.keeps() && dir == "":
		return badConfig("keep_every %d, keep_every_s %v need checkpoint_dir: kept versions are files under it", c.KeepEvery, c.KeepEverySeconds)
	}
	if err := paramstream.CheckTag(c.KeepTag); err != nil {
		return badConfig("keep_tag: %v", err)
	}
	return nil
}

// keeps reports whether c keeps any version.
func (c *KeepConfig) keeps() bool { return c.KeepEvery > 0 || c.KeepEverySeconds > 0 }

// keeper keeps a trainer's versions as its KeepConfig says.
type keeper struct {
	cfg     KeepConfig
	policy  string
	dir     string
	store   *paramstream.Versions
	last    int64 // the newest version kept, -1: none
	lastAt  time.Time
	now     func() time.Time
	kept    int64 // versions kept since configure
	removed int64 // versions collected
}

func newKeeper(info worker.Info, cfg KeepConfig, policy, checkpointDir string) *keeper {
	if !cfg.keeps() {
		return nil
	}
	return &keeper{cfg: cfg, policy: policy, dir: filepath.Join(checkpointDir, VersionsDir),
		store: paramstream.NewVersions(info.Repo, info.Trial), last: -1, now: time.Now}
}

// due reports whether a version just published is one to keep. Version 0
// is: a self-play trial's opponents are drawn from the kept versions,
// and the untrained start is the first of them.
func (k *keeper) due(version int64) bool {
	switch {
	case k == nil:
		return false
	case version == 0:
		return true
	case k.cfg.KeepEvery > 0 && version%int64(k.cfg.KeepEvery) == 0:
		return true
	}
	every := time.Duration(k.cfg.KeepEverySeconds * float64(time.Second))
	return every > 0 && k.now().Sub(k.lastAt) >= every
}

// keep sets version (of the publisher's epoch) aside and collects what
// fell out of the tag's newest KeepLast. A failure is the caller's
// warning: training goes on, and the next kept version may succeed.
func (k *keeper) keep(ctx context.Context, version int64, epoch uint64, params []float32) error {
	ctx, cancel := context.WithTimeout(ctx, keepTimeout)
	defer cancel()
	if _, err := k.store.Keep(ctx, k.policy, version, epoch, k.dir, params, k.cfg.KeepTag); err != nil {
		return err
	}
	k.last, k.lastAt = version, k.now()
	k.kept++
	n, err := k.store.Collect(ctx, k.policy, k.cfg.KeepTag, k.cfg.KeepLast)
	k.removed += int64(n)
	if err != nil {
		return fmt.Errorf("collect old versions: %w", err)
	}
	return nil
}

// afterPublish keeps version if it is due, noting a failure in warnings
// (and clearing the note once a version is kept again).
func (k *keeper) afterPublish(ctx context.Context, version int64, epoch uint64, params []float32, warnings map[string]string) {
	if !k.due(version) {
		return
	}
	if err := k.keep(ctx, version, epoch, params); err != nil {
		warnings["keep"] = fmt.Sprintf("version %d not kept: %v", version, err)
		return
	}
	delete(warnings, "keep")
}

// stats adds the keeper's figures to a trainer's stats.
func (k *keeper) stats(out map[string]any) {
	if k == nil {
		return
	}
	out["kept_version"] = k.last
	out["versions_kept"] = k.kept
	out["versions_collected"] = k.removed
}
