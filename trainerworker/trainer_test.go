package trainerworker_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker/member"
)

func TestConfigureRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]any
	}{
		{"unknown key", map[string]any{"batch_step": 64}},
		{"unknown ppo key", map[string]any{"ppo": map[string]any{"learning_rate": 1e-3}}},
		{"invalid ppo value", map[string]any{"ppo": map[string]any{"gamma": 1.5}}},
		{"negative epochs", map[string]any{"ppo": map[string]any{"epochs": -1}}},
		{"ppo not a map", map[string]any{"ppo": 3}},
		{"unknown env", map[string]any{"env": "NoSuchEnv-v0"}},
		{"bad env config", map[string]any{"env_config": map[string]any{"max_episode_steps": -5}}},
		{"negative batch_steps", map[string]any{"batch_steps": -1}},
		{"threads too many", map[string]any{"threads": 100000}},
		{"negative max_staleness", map[string]any{"max_staleness": -1}},
		{"overlap with max_staleness 0", map[string]any{"overlap": true, "max_staleness": 0}},
		{"overlap in a group", map[string]any{"overlap": true, "group_size": 2}},
		{"overlap not a bool", map[string]any{"overlap": "yes"}},
		{"dqn: overlap in a group", map[string]any{"algorithm": "dqn", "overlap": true, "group_size": 2}},
		{"negative publish_every", map[string]any{"publish_every": -2}},
		{"negative checkpoint_every", map[string]any{"checkpoint_every": -2}},
		{"negative max_updates", map[string]any{"max_updates": -2}},
		{"unknown activation", map[string]any{"activation": "gelu"}},
		{"bad hidden", map[string]any{"hidden": []int{0}}},
		{"wrong type", map[string]any{"seed": "seven"}},
		{"unknown algorithm", map[string]any{"algorithm": "sac"}},
		{"algorithm not a string", map[string]any{"algorithm": 3}},
		{"dqn: unknown key", map[string]any{"algorithm": "dqn", "batch_steps": 64}},
		{"dqn: bad dqn value", map[string]any{"algorithm": "dqn", "dqn": map[string]any{"lr": -1}}},
		{"dqn: unknown dqn key", map[string]any{"algorithm": "dqn", "dqn": map[string]any{"gamma": 0.9}}},
		{"dqn: negative batch_size", map[string]any{"algorithm": "dqn", "batch_size": -1}},
		{"dqn: tau without hard updates", map[string]any{"algorithm": "dqn", "dqn": map[string]any{"target_update_every": 0}}},
		{"conv without an image", map[string]any{"conv": []map[string]any{{"filters": 4, "kernel": 3, "stride": 1}}}},
		{"conv larger than the image", map[string]any{"env": "minatar-breakout", "conv": []map[string]any{{"filters": 4, "kernel": 11, "stride": 1}}}},
		{"conv of no filters", map[string]any{"env": "minatar-breakout", "conv": []map[string]any{{"filters": 0, "kernel": 3, "stride": 1}}}},
		{"conv not a list", map[string]any{"env": "minatar-breakout", "conv": 16}},
		{"bad device", map[string]any{"device": "gpu:0"}},
		{"cuda on a binary without it", map[string]any{"device": "cuda:0"}},
		{"dqn: cuda on a binary without it", map[string]any{"algorithm": "dqn", "device": "cuda"}},
		{"dqn: bad device", map[string]any{"algorithm": "dqn", "device": "cuda:x"}},
		{"keep_every without checkpoint_dir", map[string]any{"keep_every": 5}},
		{"dqn: keep_every without checkpoint_dir", map[string]any{"algorithm": "dqn", "keep_every": 5}},
		{"numeric keep_tag", map[string]any{"keep_every": 5, "checkpoint_dir": "/tmp/x", "keep_tag": "12"}},
		{"keep_every_s without checkpoint_dir", map[string]any{"keep_every_s": 60}},
		{"negative keep_every_s", map[string]any{"keep_every_s": -1, "checkpoint_dir": "/tmp/x"}},
		{"negative keep_last", map[string]any{"keep_last": -1}},
		{"dqn: conv of stride 0", map[string]any{"algorithm": "dqn", "env": "minatar-breakout", "conv": []map[string]any{{"filters": 4, "kernel": 3}}}},
	}
	c := newCluster(t)
	tr := c.start(t, trainerworker.TypeName, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.panel.Request(workertest.Ctx(t, 10*time.Second), tr.Name(), member.CmdConfigure, tt.cfg, nil)
			if !errors.Is(err, rpc.ErrBadArguments) {
				t.Errorf("configure: got %v, want bad_arguments", err)
			}
			if s := c.status(t, tr.Name()); s.State != member.StateReady {
				t.Errorf("state %s after a rejected configure, want %s", s.State, member.StateReady)
			}
		})
	}
}

// The trainer publishes its initial parameters at configure, before it is
// started, and they are those of a policy built from the same seed, so a
// policy worker configured alike would agree with it even before fetching.
func TestPublishesVersionZeroAtConfigure(t *testing.T) {
	c := newCluster(t)
	tr := c.start(t, trainerworker.TypeName, 0)
	c.request(t, tr.Name(), member.CmdConfigure, map[string]any{"seed": 7}, nil)
	// The publisher answers fetches from Poll, that is once started.
	c.request(t, tr.Name(), member.CmdStart, nil, nil)
	p := fetchVersion(t, newSubscriber(t, c.repo), 0)
	cfg, err := policy.ConfigForEnv(env.CartPoleName, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seed = 7
	want, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != 0 || !slices.Equal(p.Data, want.Net().Params()) {
		t.Fatalf("version %d, %d params; want version 0 with the parameters of seed 7", p.Version, len(p.Data))
	}
}

// Batches go into updates of batch_steps steps; each update is a new
// version, published and reported with its loss terms.
func TestTrainsAndPublishes(t *testing.T) {
	c := newCluster(t)
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"batch_steps": 100, "ppo": map[string]any{"minibatch_size": 50}})
	prod := newProducer(t, c.repo)
	sub := newSubscriber(t, c.repo)
	v0 := fetchVersion(t, sub, 0)

	rng := rand.New(rand.NewPCG(1, 2))
	// 3 updates of 100 steps (batches of 50, all of the current version),
	// and 30 steps left over in the buffer.
	for v := range int64(3) {
		prod.post(t, cartPoleBatch(rng, 50, v))
		prod.post(t, cartPoleBatch(rng, 50, v))
		eventually.NoError(t, 20*time.Second, fmt.Sprintf("version %d", v+1), func() error {
			if s := c.trainerStats(t, tr.Name()); s.Version != v+1 {
				return fmt.Errorf("version %d (%+v)", s.Version, s)
			}
			return nil
		})
	}
	prod.post(t, cartPoleBatch(rng, 30, 3))
	var s trainerStats
	eventually.NoError(t, 10*time.Second, "the leftover batch", func() error {
		if s = c.trainerStats(t, tr.Name()); s.BufferSteps != 30 {
			return fmt.Errorf("buffer_steps %d", s.BufferSteps)
		}
		return nil
	})
	if s.Updates != 3 || s.Trained != 300 || s.Samples != 330 || s.Episodes != 7 || s.Published != 4 {
		t.Errorf("stats %+v: want 3 updates, 300 steps trained, 330 received, 7 episodes, 4 versions published", s)
	}
	if s.MeanReturn == nil || *s.MeanReturn != (6*50+30)/7.0 {
		t.Errorf("mean_return %v, want %v", s.MeanReturn, (6*50+30)/7.0)
	}
	for name, v := range map[string]*float64{
		"policy_loss": s.PolicyLoss, "value_loss": s.ValueLoss, "entropy": s.Entropy,
		"approx_kl": s.ApproxKL, "clip_frac": s.ClipFrac, "grad_norm": s.GradNorm,
	} {
		if v == nil {
			t.Errorf("stats have no %s after an update", name)
		}
	}
	if s.LagP50 == nil || *s.LagP50 != 0 || s.LagP99 == nil || *s.LagP99 != 0 {
		t.Errorf("policy lag p50 %v p99 %v, want 0 and 0 (every batch of the current version)", s.LagP50, s.LagP99)
	}
	p := fetchVersion(t, sub, 3)
	if p.Version != 3 || slices.Equal(p.Data, v0.Data) {
		t.Errorf("fetched version %d, changed %v; want version 3 with trained parameters", p.Version, !slices.Equal(p.Data, v0.Data))
	}
}

// A batch older than the trainer's version minus max_staleness, or from a
// version the trainer has not made, is dropped; the others are buffered.
func TestStalenessBound(t *testing.T) {
	c := newCluster(t)
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"batch_steps": 100, "max_staleness": 2})
	prod := newProducer(t, c.repo)
	rng := rand.New(rand.NewPCG(3, 4))
	for v := range int64(4) { // to version 4
		prod.post(t, cartPoleBatch(rng, 100, v))
		eventually.NoError(t, 20*time.Second, fmt.Sprintf("version %d", v+1), func() error {
			if s := c.trainerStats(t, tr.Name()); s.Version != v+1 {
				return fmt.Errorf("version %d", s.Version)
			}
			return nil
		})
	}
	tests := []struct {
		version                int64
		buffered, stale, fresh bool // fresh: from the future
	}{
		{version: 4, buffered: true}, // lag 0
		{version: 3, buffered: true},
		{version: 2, buffered: true}, // lag 2 = K
		{version: 1, stale: true},    // lag 3
		{version: 0, stale: true},
		{version: 5, fresh: true}, // a version the trainer never made
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("policy_version=", tt.version), func(t *testing.T) {
			before := c.trainerStats(t, tr.Name())
			prod.post(t, cartPoleBatch(rng, 10, tt.version))
			var after trainerStats
			eventually.NoError(t, 10*time.Second, "the batch", func() error {
				if after = c.trainerStats(t, tr.Name()); after.Samples != before.Samples+10 {
					return fmt.Errorf("samples %d", after.Samples)
				}
				return nil
			})
			got := [3]bool{
				after.BufferSteps == before.BufferSteps+10,
				after.DroppedStale == before.DroppedStale+1,
				after.DroppedFuture == before.DroppedFuture+1,
			}
			if want := [3]bool{tt.buffered, tt.stale, tt.fresh}; got != want {
				t.Errorf("buffered, stale, future = %v, want %v (before %+v, after %+v)", got, want, before, after)
			}
			if after.Episodes != before.Episodes+1 {
				t.Errorf("episodes %d -> %d: a dropped batch's episode counts too", before.Episodes, after.Episodes)
			}
		})
	}
}

// Batches PPO cannot use are rejected one by one with a warning; the
// trainer keeps running and trains on the others. Its agents stat lists
// the agents whose batches it took, not a rejected one's.
func TestRejectsUnusableBatches(t *testing.T) {
	c := newCluster(t)
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"batch_steps": 40})
	prod := newProducer(t, c.repo)
	rng := rand.New(rand.NewPCG(5, 6))
	otherPolicy := cartPoleBatch(rng, 10, 0)
	otherPolicy.Policy, otherPolicy.AgentID = "other", "agent_9"
	outOfRange := cartPoleBatch(rng, 10, 0)
	outOfRange.Actions.Data[3] = 2
	noLogProbs := cartPoleBatch(rng, 10, 0)
	noLogProbs.LogProbs.Data, noLogProbs.LogProbs.Shape = nil, nil
	for _, b := range []*api.SampleBatch{otherPolicy, outOfRange, noLogProbs} {
		prod.post(t, b)
	}
	good := cartPoleBatch(rng, 40, 0)
	good.AgentID = "agent_0"
	prod.post(t, good)
	eventually.NoError(t, 20*time.Second, "one update", func() error {
		s := c.trainerStats(t, tr.Name())
		if s.Version != 1 || s.Rejected != 3 {
			return fmt.Errorf("version %d rejected %d", s.Version, s.Rejected)
		}
		if !slices.Equal(s.Agents, []string{"agent_0"}) {
			return fmt.Errorf("agents %q, want [agent_0]", s.Agents)
		}
		return nil
	})
	if st := c.status(t, tr.Name()); st.State != member.StateRunning {
		t.Fatalf("state %s: %s", st.State, st.Error)
	}
}

// With max_updates the trainer completes after that many updates, with a
// checkpoint of the last one.
func TestMaxUpdatesCompletes(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"batch_steps": 20, "max_updates": 2, "checkpoint_dir": dir, "checkpoint_every": 100})
	prod := newProducer(t, c.repo)
	rng := rand.New(rand.NewPCG(7, 8))
	for v := range int64(2) {
		prod.post(t, cartPoleBatch(rng, 20, v))
		eventually.NoError(t, 20*time.Second, fmt.Sprintf("version %d", v+1), func() error {
			if s := c.trainerStats(t, tr.Name()); s.Version != v+1 {
				return fmt.Errorf("version %d", s.Version)
			}
			return nil
		})
	}
	eventually.NoError(t, 10*time.Second, "COMPLETED", func() error {
		if s := c.status(t, tr.Name()); s.State != member.StateCompleted {
			return fmt.Errorf("state %s", s.State)
		}
		return nil
	})
	if _, err := trainerworker.ReadCheckpoint(filepath.Join(dir, trainerworker.CheckpointName(2))); err != nil {
		t.Fatalf("checkpoint of the last version: %v", err)
	}
}

// trainTo sends one batch of n steps per version until the trainer is at
// version to.
func trainTo(t *testing.T, c *cluster, name string, prod *producer, rng *rand.Rand, n int, to int64) {
	t.Helper()
	for {
		s := c.trainerStats(t, name)
		if s.Version >= to {
			return
		}
		prod.post(t, cartPoleBatch(rng, n, s.Version))
		eventually.NoError(t, 20*time.Second, fmt.Sprintf("version %d", s.Version+1), func() error {
			if got := c.trainerStats(t, name); got.Version != s.Version+1 {
				return fmt.Errorf("version %d", got.Version)
			}
			return nil
		})
	}
}

// A trainer stopped and started again on the same checkpoint_dir resumes at
// the version it stopped at, with the same parameters, and goes on from
// there; only the newest three checkpoints stay.
func TestCheckpointResume(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	cfg := map[string]any{"batch_steps": 50, "checkpoint_dir": dir, "checkpoint_every": 1, "seed": 3}
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), cfg)
	prod := newProducer(t, c.repo)
	rng := rand.New(rand.NewPCG(9, 10))
	trainTo(t, c, tr.Name(), prod, rng, 50, 5)
	before := c.trainerStats(t, tr.Name())
	sub := newSubscriber(t, c.repo)
	published := fetchVersion(t, sub, 5)
	if err := tr.Stop(); err != nil {
		t.Fatal(err)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	want := []string{trainerworker.CheckpointName(3), trainerworker.CheckpointName(4), trainerworker.CheckpointName(5)}
	if !slices.Equal(files, want) {
		t.Fatalf("checkpoint dir holds %v, want %v", files, want)
	}
	ckpt, err := trainerworker.ReadCheckpoint(filepath.Join(dir, want[2]))
	if err != nil {
		t.Fatal(err)
	}
	if ckpt.Version != 5 || ckpt.Updates != 5 || ckpt.Samples != before.Trained || ckpt.Episodes != before.Episodes {
		t.Errorf("checkpoint version %d updates %d samples %d episodes %d; the trainer had %+v",
			ckpt.Version, ckpt.Updates, ckpt.Samples, ckpt.Episodes, before)
	}
	if !slices.Equal(ckpt.Learner.Params, published.Data) {
		t.Error("the checkpoint's parameters differ from the published version 5")
	}

	tr2 := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr2.Name(), cfg)
	s := c.trainerStats(t, tr2.Name())
	if s.Version != 5 || s.ResumedFrom != 5 || s.Updates != 5 || s.Trained != before.Trained {
		t.Fatalf("resumed trainer: %+v, want version, resumed_from and updates 5", s)
	}
	p := fetchVersion(t, sub, 5)
	if p.Version != 5 || !slices.Equal(p.Data, ckpt.Learner.Params) {
		t.Fatalf("resumed trainer publishes version %d; equal to the checkpoint: %v", p.Version, slices.Equal(p.Data, ckpt.Learner.Params))
	}
	trainTo(t, c, tr2.Name(), prod, rng, 50, 7)
	if s := c.trainerStats(t, tr2.Name()); s.CkptVersion != 7 {
		t.Errorf("checkpoint_version %d after resuming and training to 7", s.CkptVersion)
	}
}

// A checkpoint cut short or damaged (the newest, as a crash while writing
// would leave it if writes were not atomic) is skipped for the one before.
func TestResumeSkipsCorruptNewest(t *testing.T) {
	tests := []struct {
		name   string
		damage func(path string) error
	}{
		{"truncated", func(p string) error {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			return os.Truncate(p, fi.Size()/2)
		}},
		{"bit flip", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)-10] ^= 0x40
			return os.WriteFile(p, b, 0o644)
		}},
		{"empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t)
			dir := t.TempDir()
			cfg := map[string]any{"batch_steps": 30, "checkpoint_dir": dir, "checkpoint_every": 1}
			tr := c.start(t, trainerworker.TypeName, 0)
			c.run(t, tr.Name(), cfg)
			trainTo(t, c, tr.Name(), newProducer(t, c.repo), rand.New(rand.NewPCG(11, 12)), 30, 3)
			if err := tr.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := tt.damage(filepath.Join(dir, trainerworker.CheckpointName(3))); err != nil {
				t.Fatal(err)
			}
			tr2 := c.start(t, trainerworker.TypeName, 0)
			c.run(t, tr2.Name(), cfg)
			if s := c.trainerStats(t, tr2.Name()); s.Version != 2 || s.ResumedFrom != 2 {
				t.Fatalf("version %d resumed_from %d, want 2 (the newest valid checkpoint)", s.Version, s.ResumedFrom)
			}
		})
	}
}

// A directory of checkpoints of another architecture is refused rather
// than resumed from.
func TestCheckpointMismatchRefused(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), map[string]any{"hidden": []int{8}, "checkpoint_dir": dir, "batch_steps": 10})
	trainTo(t, c, tr.Name(), newProducer(t, c.repo), rand.New(rand.NewPCG(1, 1)), 10, 1)
	if err := tr.Stop(); err != nil {
		t.Fatal(err)
	}

	tr = c.start(t, trainerworker.TypeName, 0)
	err := c.panel.Request(workertest.Ctx(t, 10*time.Second), tr.Name(), member.CmdConfigure,
		map[string]any{"hidden": []int{16}, "checkpoint_dir": dir}, nil)
	if !errors.Is(err, rpc.ErrBadArguments) || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("configure with another architecture: %v, want bad_arguments about the mismatch", err)
	}
}
