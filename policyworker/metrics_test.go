package policyworker_test

import (
	"cmp"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
	dto "github.com/prometheus/client_model/go"
)

// series is the series of family name about policy worker index of
// testTrial, or nil if reg has none.
func series(t *testing.T, reg *telemetry.Registry, name string, index int) *dto.Metric {
	t.Helper()
	return promtest.Series(t, reg, name, promtest.Worker(testTrial.Experiment, testTrial.Trial, policyworker.TypeName, strconv.Itoa(index)))
}

// TestMetricsAgreeWithStats serves requests and checks, with the worker
// paused, that Prometheus saw the batches the stats count: a forward pass
// per answered batch of its rows, a queue wait per answered request, and
// the version served.
func TestMetricsAgreeWithStats(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name string
		// rounds are one client's round trips in turn, a request each.
		rounds [][][]float32
		// clients, if > 0, send a request each while the worker is
		// paused, to be answered together.
		clients int
		timeout time.Duration // of the client's requests; 5 s if 0
		// failed is the requests whose batch was dropped; version, if >
		// 0, is loaded with load_params first.
		failed  int
		version int64
	}{
		{name: "one client", rounds: [][][]float32{cartPoleObs(1, 1), cartPoleObs(2, 3), cartPoleObs(3, 8), cartPoleObs(4, 2)}},
		{name: "several clients in one batch", clients: 4},
		{name: "a dropped batch is no forward pass", rounds: [][][]float32{{{0, nan, 0, 0}}, cartPoleObs(5, 2)},
			timeout: 300 * time.Millisecond, failed: 1},
		{name: "loaded parameters", rounds: [][][]float32{cartPoleObs(6, 2)}, version: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.configure(t, map[string]any{"env": env.CartPoleName})
			if tc.version > 0 {
				var p policyworker.Params
				f.do(t, policyworker.CmdGetParams, nil, &p)
				f.do(t, policyworker.CmdLoadParams, policyworker.LoadParamsArgs{Version: tc.version, Params: p.Params}, nil)
			}
			f.do(t, member.CmdStart, nil, nil)
			if tc.clients > 0 {
				f.acrossClients(t, cartPoleObs(7, tc.clients))
			}
			c := newClient(t, f.repo, 4, cmp.Or(tc.timeout, 5*time.Second))
			w := newWaiter(c)
			failed := 0
			for _, obs := range tc.rounds {
				_, errs := roundTrip(t, c, w, obs)
				for _, err := range errs {
					if err != nil {
						failed++
					}
				}
			}
			if failed != tc.failed {
				t.Fatalf("%d requests failed, want %d", failed, tc.failed)
			}
			f.do(t, member.CmdPause, nil, nil)
			st := f.stats(t)
			batches, rows := num(t, st, "batches"), num(t, st, "rows")
			if batches == 0 {
				t.Fatal("no batch served")
			}
			hist := func(name string) *dto.Histogram {
				t.Helper()
				h := series(t, f.metrics, name, 0).GetHistogram()
				if h == nil {
					t.Fatalf("no %s series", name)
				}
				return h
			}
			size, wait, fwd := hist("distrl_inference_batch_size"), hist("distrl_inference_queue_wait_seconds"), hist("distrl_inference_forward_seconds")
			for _, c := range []struct {
				what      string
				got, want float64
			}{
				{"batch size count (forward passes)", float64(size.GetSampleCount()), batches},
				{"batch size sum (rows)", size.GetSampleSum(), rows},
				{"forward count", float64(fwd.GetSampleCount()), batches},
				// Every message taken is a request; the dropped batch's
				// were not answered.
				{"queue wait count (answered requests)", float64(wait.GetSampleCount()), num(t, st, "messages") - float64(tc.failed)},
				{"version", series(t, f.metrics, "distrl_policy_version", 0).GetGauge().GetValue(), num(t, st, member.StatVersion)},
				{"version loaded", num(t, st, member.StatVersion), float64(tc.version)},
			} {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v (stats %v)", c.what, c.got, c.want, st)
				}
			}
		})
	}
}
