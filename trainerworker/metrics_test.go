package trainerworker_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker/member"
	dto "github.com/prometheus/client_model/go"
)

// series is the series of family name about trainer 0 of testTrial (and
// the extra label pairs kv), or nil if reg has none.
func series(t *testing.T, reg *telemetry.Registry, name string, kv ...string) *dto.Metric {
	t.Helper()
	return promtest.Series(t, reg, name, promtest.Worker(testTrial.Experiment, testTrial.Trial, trainerworker.TypeName, "0", kv...))
}

// Figures of the trainer's series a test checks.
func value(m *dto.Metric) float64    { return promtest.Value(m) }
func lagCount(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }
func lagMean(m *dto.Metric) float64 {
	return m.GetHistogram().GetSampleSum() / float64(m.GetHistogram().GetSampleCount())
}

// stat reads a numeric figure of a stats reply; absent, it is NaN.
func stat(t *testing.T, st map[string]any, key string) float64 {
	t.Helper()
	v, err := api.Config(st).Float(key, math.NaN())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMetricsAgreeWithStats trains with each algorithm and checks, with
// the trainer paused, that its series agree with its stats.
func TestMetricsAgreeWithStats(t *testing.T) {
	type check struct {
		metric string
		labels []string // extra label pairs
		got    func(*dto.Metric) float64
		stat   string // the stats figure it must equal
		want   float64
		// tol is the relative difference allowed: a sum of float seconds
		// against one of durations.
		tol float64
	}
	// Fixed by the drive of the PPO case: of its batches, the one of
	// version 0 sent at version 2 is 10 steps too stale, the one of version
	// 5 from the future (neither stale nor lagging).
	const staleSteps, futureSteps = 10, 10
	cases := []struct {
		name  string
		drive func(t *testing.T, c *cluster) string // runs the trainer; returns its name
		// checks are the algorithm's own, besides common.
		checks []check
	}{
		{
			name: "ppo",
			drive: func(t *testing.T, c *cluster) string {
				tr := c.start(t, trainerworker.TypeName, 0)
				c.run(t, tr.Name(), map[string]any{"batch_steps": 100, "max_staleness": 1,
					"checkpoint_dir": t.TempDir(), "checkpoint_every": 1})
				prod := newProducer(t, c.repo)
				rng := rand.New(rand.NewPCG(11, 12))
				trainTo(t, c, tr.Name(), prod, rng, 100, 2)
				for _, b := range []*api.SampleBatch{cartPoleBatch(rng, staleSteps, 0), cartPoleBatch(rng, futureSteps, 5), cartPoleBatch(rng, 30, 2)} {
					prod.post(t, b)
				}
				eventually.NoError(t, 10*time.Second, "the last batches", func() error {
					if s := c.trainerStats(t, tr.Name()); s.BufferSteps != 30 || s.DroppedStale != 1 || s.DroppedFuture != 1 {
						return fmt.Errorf("%+v", s)
					}
					return nil
				})
				return tr.Name()
			},
			checks: []check{
				{metric: "distrl_trainer_samples_dropped_stale_total", got: value, want: staleSteps},
				// Every batch taken but the future one: 2 trained, 1 stale
				// and 1 buffered.
				{metric: "distrl_policy_lag", got: lagCount, want: 4},
				{metric: "distrl_policy_lag", got: lagMean, stat: member.StatPolicyLag},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "policy"}, got: value, stat: "policy_loss"},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "value"}, got: value, stat: "value_loss"},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "entropy"}, got: value, stat: "entropy"},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "approx_kl"}, got: value, stat: "approx_kl"},
			},
		},
		{
			name: "dqn",
			drive: func(t *testing.T, c *cluster) string {
				_, tr := startDQN(t, c, map[string]any{"batch_size": 16, "publish_every": 5, "eval_every": 5,
					"checkpoint_dir": t.TempDir(), "checkpoint_every": 5})
				eventually.True(t, 20*time.Second, "checkpoints and evaluation episodes", func() bool {
					s := c.trainerStats(t, tr.Name())
					return s.Checkpoints > 0 && s.Episodes > 0
				})
				return tr.Name()
			},
			checks: []check{
				// Off-policy: no batch is stale, and a transition does not
				// say which version collected it.
				{metric: "distrl_trainer_samples_dropped_stale_total", got: value, want: 0},
				{metric: "distrl_policy_lag", got: lagCount, want: 0},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "loss"}, got: value, stat: "loss"},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "td"}, got: value, stat: "mean_td"},
				{metric: "distrl_trainer_loss", labels: []string{"loss", "mean_q"}, got: value, stat: "mean_q"},
			},
		},
	}
	// What both algorithms' series and stats count alike.
	common := []check{
		{metric: "distrl_trainer_samples_total", got: value, stat: "samples_trained"},
		{metric: "distrl_trainer_updates_total", got: value, stat: "updates"},
		{metric: "distrl_episodes_total", got: value, stat: member.StatEpisodes},
		{metric: "distrl_episode_return", got: value, stat: member.StatMeanReturn},
		{metric: "distrl_trainer_checkpoints_total", got: value, stat: "checkpoints"},
		{metric: "distrl_policy_version", got: value, stat: member.StatVersion},
		{metric: "distrl_trainer_update_seconds_total", got: value, stat: "update_s", tol: 1e-9},
		{metric: "distrl_trainer_loop_seconds_total", got: value, stat: "loop_s", tol: 1e-9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			name := tc.drive(t, c)
			c.request(t, name, member.CmdPause, nil, nil)
			var st map[string]any
			c.request(t, name, member.CmdStats, nil, &st)
			if stat(t, st, "updates") < 2 {
				t.Fatalf("too little training to check: %v", st)
			}
			for _, ck := range append(common, tc.checks...) {
				m := series(t, c.metrics, ck.metric, ck.labels...)
				if m == nil && (ck.stat != "" || ck.want != 0) {
					t.Errorf("no %s%v series", ck.metric, ck.labels)
					continue
				}
				want := ck.want
				if ck.stat != "" {
					want = stat(t, st, ck.stat)
				}
				if got := ck.got(m); math.Abs(got-want) > ck.tol*math.Abs(want) || (ck.tol > 0 && !(want > 0)) {
					t.Errorf("%s%v = %v, want %v (stats %v)", ck.metric, ck.labels, got, want, st)
				}
			}
		})
	}
}
