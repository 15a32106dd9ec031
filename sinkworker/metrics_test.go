package sinkworker_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/sinkworker"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
	dto "github.com/prometheus/client_model/go"
)

// series is the series of family name about sink index of testTrial, or
// nil if reg has none.
func series(t *testing.T, reg *telemetry.Registry, name string, index int) *dto.Metric {
	t.Helper()
	return promtest.Series(t, reg, name, promtest.Worker(testTrial.Experiment, testTrial.Trial, sinkworker.TypeName, strconv.Itoa(index)))
}

// TestMetricsAgreeWithStats sends a sink batches and checks, with the
// sink paused, that Prometheus counted the steps and episodes its stats
// did.
func TestMetricsAgreeWithStats(t *testing.T) {
	cases := []struct {
		name                  string
		batches, steps, every int
	}{
		{"episodes in every batch", 6, 10, 5},
		{"no episode", 3, 7, 0},
		{"an episode per batch", 4, 6, 6},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			reg := startSink(t, repo, i)
			panel := workertest.Panel(t, repo, testTrial)
			name := names.WorkerName(sinkworker.TypeName, i)
			for _, cmd := range []string{member.CmdConfigure, member.CmdStart} {
				if err := panel.Request(ctxT(t), name, cmd, map[string]any{"stream": tc.name}, nil); err != nil {
					t.Fatalf("%s: %v", cmd, err)
				}
			}
			p, err := stream.NewSampleProducer(ctxT(t), stream.SampleProducerOptions{Repo: repo, Trial: testTrial, Stream: tc.name, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			// Batches of one actor, so that an episode may span them.
			b := batchOf(t, "actor/0", tc.steps, tc.every)
			for range tc.batches {
				post(t, p, b)
			}
			var s summary
			eventually.True(t, 5*time.Second, "every batch", func() bool {
				if err := panel.Request(ctxT(t), name, "summary", nil, &s); err != nil {
					t.Fatal(err)
				}
				return s.Batches == int64(tc.batches)
			})
			if err := panel.Request(ctxT(t), name, member.CmdPause, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := panel.Request(ctxT(t), name, "summary", nil, &s); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				metric string
				want   int64
			}{
				{"distrl_sink_samples_total", s.Steps},
				{"distrl_episodes_total", s.Episodes},
			} {
				if got := series(t, reg, c.metric, i).GetCounter().GetValue(); got != float64(c.want) {
					t.Errorf("%s = %v, want %d (summary %+v)", c.metric, got, c.want, s)
				}
			}
			if s.Steps != int64(tc.batches*tc.steps) {
				t.Errorf("summary %+v, want %d steps", s, tc.batches*tc.steps)
			}
		})
	}
}
