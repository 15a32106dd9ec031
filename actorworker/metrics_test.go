package actorworker_test

import (
	"strconv"
	"testing"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	dto "github.com/prometheus/client_model/go"
)

// series is the series of family name about worker typ/index of
// testTrial, or nil if reg has none.
func series(t *testing.T, reg *telemetry.Registry, name, typ string, index int) *dto.Metric {
	t.Helper()
	return promtest.Series(t, reg, name, promtest.Worker(testTrial.Experiment, testTrial.Trial, typ, strconv.Itoa(index)))
}

// value is the value of the counter or gauge of family name about actor
// 0 of testTrial; the test fails if there is none.
func value(t *testing.T, reg *telemetry.Registry, name string) float64 {
	t.Helper()
	m := series(t, reg, name, actorworker.TypeName, 0)
	if m == nil {
		t.Fatalf("no %s series", name)
	}
	return promtest.Value(m)
}

// checkActorMetrics checks the actor series of reg against their counts
// (the return gauge against the mean return of st, the last stats).
func checkActorMetrics(t *testing.T, reg *telemetry.Registry, steps, episodes, failures int64, st map[string]any) {
	t.Helper()
	for _, c := range []struct {
		metric string
		want   float64
	}{
		{"distrl_env_steps_total", float64(steps)},
		{"distrl_episodes_total", float64(episodes)},
		{"distrl_actor_inference_failures_total", float64(failures)},
		{"distrl_episode_return", st[member.StatMeanReturn].(float64)},
	} {
		if got := value(t, reg, c.metric); got != c.want {
			t.Errorf("%s = %v, want %v (stats %v)", c.metric, got, c.want, st)
		}
	}
}

// TestMetricsAgreeWithStats runs an actor and checks, once it has
// completed or been paused, that Prometheus counted what its stats did.
func TestMetricsAgreeWithStats(t *testing.T) {
	cases := []struct {
		name string
		// cfg is run to completion if it bounds the steps, else until 300
		// steps and paused.
		cfg map[string]any
		// policyLate starts the policy worker only once the actor's
		// requests have failed.
		policyLate bool
	}{
		{name: "completed", cfg: map[string]any{"inference": "inline", "sample_stream": "null", "ring_size": 3, "max_env_steps": 500}},
		{name: "paused", cfg: map[string]any{"inference": "inline", "sample_stream": "null", "ring_size": 2}},
		{name: "inference failures", cfg: map[string]any{"sample_stream": "null", "inference_timeout_ms": 100, "max_env_steps": 200},
			policyLate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t)
			name := cl.start(t, actorworker.TypeName, 0)
			cl.run(t, name, tc.cfg)
			if tc.policyLate {
				waitFor(t, "an inference failure", func() bool {
					return statInt(t, cl.stats(t, name), "inference_failures") > 0
				})
				pw := cl.start(t, policyworker.TypeName, 0)
				cl.run(t, pw, map[string]any{"env": env.CartPoleName})
			}
			if _, bounded := tc.cfg["max_env_steps"]; bounded {
				cl.waitState(t, name, member.StateCompleted)
			} else {
				waitFor(t, "300 steps", func() bool { return statInt(t, cl.stats(t, name), member.StatEnvSteps) >= 300 })
				cl.request(t, name, member.CmdPause, nil)
				cl.waitState(t, name, member.StatePaused)
			}
			st := cl.stats(t, name)
			episodes, failures := statInt(t, st, member.StatEpisodes), statInt(t, st, "inference_failures")
			if episodes == 0 || (tc.policyLate && failures == 0) {
				t.Fatalf("nothing to check: %v", st)
			}
			checkActorMetrics(t, cl.metrics, statInt(t, st, member.StatEnvSteps), episodes, failures, st)
		})
	}
}

// TestMetricsOverReconfigure configures an actor again after it ran (as a
// type's user may; the worker base allows it only before start): its
// stats start over, its counters go on from where they were.
func TestMetricsOverReconfigure(t *testing.T) {
	reg := telemetry.NewRegistry()
	impl, err := actorworker.New(worker.Info{Name: "actor/0", Type: actorworker.TypeName, Trial: testTrial,
		Repo: workertest.Repo(t), Logger: testLogger(t),
		Metrics: reg.Worker(telemetry.Identity{Experiment: testTrial.Experiment, Trial: testTrial.Trial, Type: actorworker.TypeName})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { impl.Close() })
	var steps, episodes int64
	var st map[string]any
	for _, maxSteps := range []int{300, 200} {
		cfg := map[string]any{"inference": "inline", "sample_stream": "null", "ring_size": 2, "max_env_steps": maxSteps}
		if err := impl.Configure(t.Context(), workertest.Args(t, cfg)); err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			res, err := impl.Poll(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			done = res.Done
		}
		st = impl.Stats()
		steps += st[member.StatEnvSteps].(int64)
		episodes += st[member.StatEpisodes].(int64)
	}
	if steps != 500 {
		t.Fatalf("the runs took %d steps, want 500", steps)
	}
	checkActorMetrics(t, reg, steps, episodes, 0, st)
}
