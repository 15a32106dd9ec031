package trainerworker_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// groupStats are the figures of a trainer group's member the tests read.
type groupStats struct {
	trainerStats
	Size    int  `msgpack:"group_size"`
	Rank    int  `msgpack:"group_rank"`
	Formed  bool `msgpack:"group_formed"`
	Reforms int  `msgpack:"group_reforms"`
	Syncs   int  `msgpack:"group_syncs"`
	// AllreduceMs is the last update's time in all-reduces.
	AllreduceMs float64 `msgpack:"allreduce_ms"`
}

func (c *cluster) groupStats(t testing.TB, name string) groupStats {
	t.Helper()
	var s groupStats
	c.request(t, name, member.CmdStats, nil, &s)
	return s
}

// feed posts batches of the group's current version until rank 0 reaches
// version want.
func feed(t *testing.T, c *cluster, prod *producer, rng *rand.Rand, want int64) {
	t.Helper()
	eventually.NoError(t, 60*time.Second, fmt.Sprintf("the group at version %d", want), func() error {
		s := c.groupStats(t, "trainer/0")
		if s.Version >= want {
			return nil
		}
		prod.post(t, cartPoleBatch(rng, 25, s.Version))
		return fmt.Errorf("version %d", s.Version)
	})
}

// Two trainers of one policy learn as one: batches dealt between them, one
// update (one version) per 100 steps of the pair, the parameters compared
// after every update (a difference would move them to ERROR and fail the
// test), rank 0 alone publishing and checkpointing.
func TestGroupTrainsAsOne(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	cfg := map[string]any{"batch_steps": 100, "group_size": 2, "group_check_every": 1, "checkpoint_dir": dir,
		"checkpoint_every": 2, "ppo": map[string]any{"minibatch_size": 50}}
	for i := range 2 {
		c.start(t, trainerworker.TypeName, i)
		c.request(t, fmt.Sprintf("trainer/%d", i), member.CmdConfigure, cfg, nil)
	}
	for i := range 2 {
		c.request(t, fmt.Sprintf("trainer/%d", i), member.CmdStart, nil, nil)
	}
	prod := newProducer(t, c.repo)
	sub := newSubscriber(t, c.repo)
	rng := rand.New(rand.NewPCG(1, 2))
	feed(t, c, prod, rng, 6)

	lead, other := c.groupStats(t, "trainer/0"), c.groupStats(t, "trainer/1")
	for _, s := range []groupStats{lead, other} {
		if s.Size != 2 || !s.Formed || s.Syncs != 1 || s.Reforms != 0 {
			t.Errorf("rank %d: size %d, formed %v, %d syncs, %d re-formations; want 2, true, 1, 0", s.Rank, s.Size, s.Formed, s.Syncs, s.Reforms)
		}
		if s.Trained == 0 {
			t.Errorf("rank %d trained no samples: the batches were not dealt between the members", s.Rank)
		}
	}
	if d := lead.Version - other.Version; d < -1 || d > 1 {
		t.Errorf("rank 0 at version %d, rank 1 at %d: the members update together", lead.Version, other.Version)
	}
	if other.Published != 0 || other.Checkpoints != 0 {
		t.Errorf("rank 1 published %d versions and wrote %d checkpoints; only rank 0 does", other.Published, other.Checkpoints)
	}
	if lead.Checkpoints == 0 {
		t.Errorf("rank 0 wrote no checkpoint")
	}
	eventually.NoError(t, 10*time.Second, "rank 1's note", func() error {
		if n := c.status(t, "trainer/1").Note; !strings.HasPrefix(n, "rank 1 of a group of 2; all-reduces") {
			return fmt.Errorf("note %q", n)
		}
		return nil
	})
	if lead.AllreduceMs <= 0 {
		t.Errorf("rank 0's last update spent %v ms in all-reduces", lead.AllreduceMs)
	}
	if m := series(t, c.metrics, "distrl_trainer_allreduce_seconds_total"); m == nil || value(m) <= 0 {
		t.Errorf("distrl_trainer_allreduce_seconds_total of trainer/0: %v", m)
	}
	if p := fetchVersion(t, sub, lead.Version); p.Version < 6 {
		t.Errorf("the policy's newest version is %d, want >= 6", p.Version)
	}
}

// A member that dies is noticed by the other, which keeps its state; a new
// process of that rank joins, takes rank 0's state, and the group learns
// on from where it was.
func TestGroupMemberRestarts(t *testing.T) {
	c := newCluster(t)
	cfg := map[string]any{"batch_steps": 100, "group_size": 2, "group_check_every": 1, "ppo": map[string]any{"minibatch_size": 50}}
	c.start(t, trainerworker.TypeName, 0)
	one := c.start(t, trainerworker.TypeName, 1)
	for i := range 2 {
		c.run(t, fmt.Sprintf("trainer/%d", i), cfg)
	}
	prod := newProducer(t, c.repo)
	rng := rand.New(rand.NewPCG(3, 4))
	feed(t, c, prod, rng, 3)

	if err := one.Stop(); err != nil {
		t.Fatalf("trainer/1 stopped with %v", err)
	}
	before := c.groupStats(t, "trainer/0").Version
	c.start(t, trainerworker.TypeName, 1)
	c.run(t, "trainer/1", cfg)
	feed(t, c, prod, rng, before+3)

	lead, other := c.groupStats(t, "trainer/0"), c.groupStats(t, "trainer/1")
	if lead.Reforms == 0 || lead.Syncs < 2 {
		t.Errorf("rank 0: %d re-formations, %d syncs after rank 1 restarted; want >= 1 and >= 2", lead.Reforms, lead.Syncs)
	}
	if m := series(t, c.metrics, "distrl_trainer_group_reforms_total"); m == nil || value(m) < 1 {
		t.Errorf("distrl_trainer_group_reforms_total of trainer/0: %v, want >= 1", m)
	}
	if other.Version < before {
		t.Errorf("the restarted rank 1 is at version %d, behind the %d the group had: it did not take rank 0's state", other.Version, before)
	}
}

// A trainer configured differently from rank 0 is refused with the reason,
// and rank 0 keeps waiting for a member that fits.
func TestGroupRefusesAMismatchedMember(t *testing.T) {
	c := newCluster(t)
	c.start(t, trainerworker.TypeName, 0)
	c.run(t, "trainer/0", map[string]any{"group_size": 2})
	odd := workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: trainerworker.TypeName, Index: 1, Host: "127.0.0.1", Repo: c.repo,
		IdleWait: 20 * time.Millisecond, Logger: testLogger(t), Metrics: c.metrics,
	})
	c.run(t, odd.Name(), map[string]any{"group_size": 2, "ppo": map[string]any{"lr": 1e-2}})
	eventually.NoError(t, 20*time.Second, "trainer/1 refused", func() error {
		s := c.status(t, odd.Name())
		if s.State != member.StateError {
			return fmt.Errorf("state %s", s.State)
		}
		if !strings.Contains(s.Error, "configured differently from rank 0") {
			t.Fatalf("error %q does not say why", s.Error)
		}
		return nil
	})
	if s := c.groupStats(t, "trainer/0"); s.Formed || s.Version != 0 {
		t.Errorf("rank 0 formed %v at version %d with a refused member", s.Formed, s.Version)
	}
}

// Two DQN trainers sample the replay as one learner: each its share of
// batch_size, steps taken together (parameters compared after every one),
// priorities sent back by both, rank 0 alone publishing and evaluating.
func TestDQNGroupLearnsFromReplay(t *testing.T) {
	c := newCluster(t)
	rp, trs := startDQNs(t, c, 2, map[string]any{"batch_size": 32, "publish_every": 5, "eval_every": 10, "group_size": 2,
		"group_check_every": 1, "dqn": map[string]any{"dueling": true, "target_update_every": 20}})
	fetchVersion(t, newSubscriber(t, c.repo), 30)
	type stats struct {
		Version        int64 `msgpack:"version"`
		Episodes       int64 `msgpack:"episodes"`
		PrioritiesSent int64 `msgpack:"priorities_sent"`
		Formed         bool  `msgpack:"group_formed"`
		Published      int64 `msgpack:"published"`
	}
	var st [2]stats
	eventually.True(t, 20*time.Second, "both members stepping and sending priorities", func() bool {
		for i, tr := range trs {
			c.request(t, tr.Name(), member.CmdStats, nil, &st[i])
		}
		return st[0].PrioritiesSent > 0 && st[1].PrioritiesSent > 0 && st[1].Version >= 30
	})
	if !st[0].Formed || !st[1].Formed || st[1].Episodes != 0 || st[0].Episodes == 0 {
		t.Errorf("stats %+v: want both formed, rank 0 alone evaluating", st)
	}
	if d := st[0].Version - st[1].Version; d < -4 || d > 4 {
		t.Errorf("rank 0 at version %d, rank 1 at %d: they step together", st[0].Version, st[1].Version)
	}
	var rs struct {
		PriorityUpdates int64 `msgpack:"priority_updates"`
	}
	c.request(t, rp.Name(), member.CmdStats, nil, &rs)
	if rs.PriorityUpdates == 0 {
		t.Error("the replay received no priority updates")
	}
}

// Configurations a group refuses before anything starts.
func TestGroupConfigChecked(t *testing.T) {
	for _, tt := range []struct {
		name  string
		index int
		cfg   map[string]any
		want  string
	}{
		{"rank past the group", 2, map[string]any{"group_size": 2}, "trainer 2 of a group of 2"},
		{"negative timeout", 0, map[string]any{"group_size": 2, "group_timeout_ms": -1}, "group_timeout_ms"},
		{"dqn: rank past the group", 3, map[string]any{"algorithm": "dqn", "group_size": 2}, "trainer 3 of a group of 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := trainerworker.CheckConfig(workertest.Args(t, tt.cfg), tt.index)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckConfig: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if err := trainerworker.CheckConfig(workertest.Args(t, map[string]any{"group_size": 4}), 3); err != nil {
		t.Fatalf("rank 3 of 4: %v", err)
	}
}
