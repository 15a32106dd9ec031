package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/worker/member"
)

func TestAggregate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	actor := func(name string, steps, episodes int64, ret float64) sample {
		return sample{name: name, typ: "actor", state: "RUNNING",
			stats: map[string]any{"env_steps": steps, "episodes": int32(episodes), "mean_return": ret, "junk": "x"}}
	}
	tests := []struct {
		name      string
		samples   []sample
		prev      *Metrics
		steps     int64
		episodes  int64
		ret       float64 // -1: none
		retEps    int64
		version   int64 // -1: none
		stepsPerS float64
	}{
		{
			name:    "no episodes yet",
			samples: []sample{actor("actor/0", 100, 0, 0)},
			steps:   100, ret: -1, version: -1, stepsPerS: 50,
		},
		{
			name:    "returns weighted by the episodes each actor holds",
			samples: []sample{actor("actor/0", 1000, 5, 10), actor("actor/1", 3000, 40, 40)},
			steps:   4000, episodes: 45, ret: (5*10 + 20*40) / 25.0, retEps: 25, version: -1, stepsPerS: 2000,
		},
		{
			name: "a restarted actor keeps its earlier counts",
			samples: []sample{
				{name: "actor/0", typ: "actor", stats: map[string]any{"env_steps": uint16(10)}, base: counters{envSteps: 500, episodes: 7}},
				{name: "actor/1", typ: "actor", state: "RESTARTING", base: counters{envSteps: 90, episodes: 1}},
			},
			prev:  &Metrics{Time: t0.Add(-time.Second), EnvSteps: 400},
			steps: 600, episodes: 8, ret: -1, version: -1, stepsPerS: 200,
		},
		{
			name:    "a line right after the previous keeps its rate",
			samples: []sample{actor("actor/0", 1010, 0, 0)},
			prev:    &Metrics{Time: t0.Add(-10 * time.Millisecond), EnvSteps: 1000, StepsPerS: 321},
			steps:   1010, ret: -1, version: -1, stepsPerS: 321,
		},
		{
			name: "the trainer's figures win over the actors' and policy workers'",
			samples: []sample{
				actor("actor/0", 10, 30, 1),
				{name: "policy/0", typ: "policy", stats: map[string]any{"version": int64(3)}},
				{name: "trainer/0", typ: "trainer", stats: map[string]any{"version": int64(7), "mean_return": 99.5, "policy_lag": 0.5}},
			},
			steps: 10, episodes: 30, ret: 99.5, retEps: member.ReturnWindow, version: 7, stepsPerS: 5,
		},
		{
			name: "a trainer group is one learner: returns weighed by each member's episodes, the newest version",
			samples: []sample{
				{name: "trainer/0", typ: "trainer", stats: map[string]any{"version": int64(7), "mean_return": 100.0, "episodes": 30, "policy_lag": 0.5}},
				{name: "trainer/1", typ: "trainer", stats: map[string]any{"version": int64(6), "mean_return": 40.0, "episodes": 10, "policy_lag": 1.5}},
			},
			ret: (20*100 + 10*40) / 30.0, retEps: 30, version: 7,
		},
		{
			name: "the newest policy version without a trainer",
			samples: []sample{
				{name: "policy/0", typ: "policy", stats: map[string]any{"version": int8(3)}},
				{name: "policy/1", typ: "policy", stats: map[string]any{"version": int8(5)}},
			},
			ret: -1, version: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := aggregate(t0, 2*time.Second, tt.samples, tt.prev, 0)
			if m.EnvSteps != tt.steps || m.Episodes != tt.episodes || m.StepsPerS != tt.stepsPerS {
				t.Errorf("steps %d episodes %d rate %v; want %d %d %v", m.EnvSteps, m.Episodes, m.StepsPerS, tt.steps, tt.episodes, tt.stepsPerS)
			}
			switch {
			case tt.ret < 0 && m.MeanReturn != nil:
				t.Errorf("mean return %v, want none", *m.MeanReturn)
			case tt.ret >= 0 && (m.MeanReturn == nil || *m.MeanReturn != tt.ret || m.ReturnEpisodes != tt.retEps):
				t.Errorf("mean return %v over %d, want %v over %d", m.MeanReturn, m.ReturnEpisodes, tt.ret, tt.retEps)
			}
			switch {
			case tt.version < 0 && m.Version != nil:
				t.Errorf("version %d, want none", *m.Version)
			case tt.version >= 0 && (m.Version == nil || *m.Version != tt.version):
				t.Errorf("version %v, want %d", m.Version, tt.version)
			}
			if len(m.Workers) != len(tt.samples) {
				t.Errorf("%d workers in the line, want %d", len(m.Workers), len(tt.samples))
			}
			for name, w := range m.Workers {
				if _, ok := w["junk"]; ok {
					t.Errorf("%s: non-numeric stat kept: %v", name, w)
				}
				if _, ok := w["state"]; !ok {
					t.Errorf("%s: no state", name)
				}
			}
		})
	}
}

func TestStopCondition(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name string
		stop experiment.Stop
		m    Metrics
		want string // substring; "" for no stop
	}{
		{"no conditions", experiment.Stop{}, Metrics{EnvSteps: 1e9}, ""},
		{"env steps short", experiment.Stop{EnvSteps: 100}, Metrics{EnvSteps: 99}, ""},
		{"env steps reached", experiment.Stop{EnvSteps: 100}, Metrics{EnvSteps: 100}, "env steps"},
		{"target with too few episodes", experiment.Stop{TargetReturn: f(10)}, Metrics{MeanReturn: f(11), ReturnEpisodes: 19}, ""},
		{"target below", experiment.Stop{TargetReturn: f(10)}, Metrics{MeanReturn: f(9), ReturnEpisodes: 40}, ""},
		{"target reached", experiment.Stop{TargetReturn: f(10)}, Metrics{MeanReturn: f(10), ReturnEpisodes: 20}, "target"},
		{"target, no return yet", experiment.Stop{TargetReturn: f(10)}, Metrics{}, ""},
		{"evaluation below", experiment.Stop{EvalReturn: f(0.5)}, Metrics{BestReturn: f(0.4), BestVersion: new(int64(30))}, ""},
		{"evaluation reached", experiment.Stop{EvalReturn: f(0.5)}, Metrics{BestReturn: f(0.5), BestVersion: new(int64(30))}, "version 30 evaluated"},
		{"evaluation, none yet", experiment.Stop{EvalReturn: f(0.5)}, Metrics{MeanReturn: f(1), ReturnEpisodes: 40}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{cfg: &experiment.Config{Stop: tt.stop}}
			got := c.stopCondition(&tt.m)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("stopCondition = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKeyStatsAndFormat(t *testing.T) {
	st := map[string]any{"env_steps": int64(12), "mean_return": 2.5, "name": "actor/0", "polls": 3}
	got := FormatStats(KeyStats("actor", st))
	if got != "env_steps=12 mean_return=2.5" {
		t.Errorf("actor: %q", got)
	}
	// Environment info values are kept too.
	withInfo := map[string]any{"env_steps": int64(12), "info_x": 0.5, "info_name": "not a number"}
	if got := FormatStats(KeyStats("actor", withInfo)); got != "env_steps=12 info_x=0.5" {
		t.Errorf("actor with info: %q", got)
	}
	// A type without a list keeps every numeric figure.
	if got := FormatStats(KeyStats("newtype", st)); got != "env_steps=12 mean_return=2.5 polls=3" {
		t.Errorf("unknown type: %q", got)
	}
}

func TestStatusLine(t *testing.T) {
	r, v, d := 21.5, int64(3), 0.0912
	line := statusLine(&Metrics{ElapsedS: 3725, EnvSteps: 1_234_567, StepsPerS: 45_600, Episodes: 980, MeanReturn: &r, Version: &v,
		DroppedShare: &d, Restarts: 1}, 3, 4)
	for _, want := range []string{"[01:02:05]", "1.23M", "45.6k/s", "episodes 980", "return 21.5", "version 3", "dropped 9.1%", "3/4 running", "restarts 1"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if line := statusLine(&Metrics{}, 1, 1); strings.Contains(line, "dropped") {
		t.Errorf("%q says dropped without a trainer that drops", line)
	}
}

// The dropped share is the PPO trainers' dropped steps over all they took
// in (dropped, trained, buffered), summed; a DQN trainer (no dropped_steps)
// does not count.
func TestAggregateDroppedShare(t *testing.T) {
	ppo := func(name string, dropped, trained, buffered int64) sample {
		return sample{name: name, typ: "trainer", stats: map[string]any{
			"dropped_steps": dropped, "samples_trained": trained, "buffer_steps": buffered}}
	}
	dqn := sample{name: "trainer/0", typ: "trainer", stats: map[string]any{"samples_trained": int64(5000)}}
	for _, tt := range []struct {
		name    string
		samples []sample
		want    float64 // -1: absent
	}{
		{"no trainer", nil, -1},
		{"a DQN trainer", []sample{dqn}, -1},
		{"nothing taken in yet", []sample{ppo("trainer/0", 0, 0, 0)}, -1},
		{"one trainer", []sample{ppo("trainer/0", 100, 800, 100)}, 0.1},
		{"a group, summed", []sample{ppo("trainer/0", 100, 900, 0), ppo("trainer/1", 300, 700, 0)}, 0.2},
		{"nothing dropped", []sample{ppo("trainer/0", 0, 1024, 512)}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := aggregate(time.Unix(1000, 0), time.Second, tt.samples, nil, 0)
			switch {
			case tt.want < 0 && m.DroppedShare != nil:
				t.Errorf("dropped share %v, want none", *m.DroppedShare)
			case tt.want >= 0 && (m.DroppedShare == nil || *m.DroppedShare != tt.want):
				t.Errorf("dropped share %v, want %v", m.DroppedShare, tt.want)
			}
		})
	}
}

// The trial's best version is the one an evaluator that tags the best
// names (the best of them): an evaluator against a weak opponent, with no
// best tag, scores higher and is not it.
func TestAggregateBestFromTaggingEvaluators(t *testing.T) {
	eval := func(name, tag string, version int64, ret float64) sample {
		return sample{name: name, typ: "evaluator", state: "RUNNING",
			stats: map[string]any{"best_tag": tag, "best_version": version, "best_return": ret}}
	}
	for _, tt := range []struct {
		name    string
		samples []sample
		version int64 // -1: none
		ret     float64
	}{
		{"no evaluator", nil, -1, 0},
		{"weak opponent only", []sample{eval("eval-random/0", "", 30, 0.9)}, -1, 0},
		{"the tagging one", []sample{eval("eval-random/0", "", 30, 0.9), eval("eval-scripted/0", "best", 20, -0.2)}, 20, -0.2},
		{"the best of two tagging", []sample{eval("a/0", "best", 20, 1), eval("b/0", "top", 40, 3)}, 40, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := aggregate(time.Unix(1000, 0), time.Second, tt.samples, nil, 0)
			switch {
			case tt.version < 0 && (m.BestVersion != nil || m.BestReturn != nil):
				t.Errorf("best version %v return %v, want none", m.BestVersion, m.BestReturn)
			case tt.version >= 0 && (m.BestVersion == nil || *m.BestVersion != tt.version || *m.BestReturn != tt.ret):
				t.Errorf("best version %v return %v, want %d %v", m.BestVersion, m.BestReturn, tt.version, tt.ret)
			}
		})
	}
}
