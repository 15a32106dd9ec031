package replayworker_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
	dto "github.com/prometheus/client_model/go"
)

// series is the series of family name about table of replay worker index
// of testTrial, or nil if reg has none.
func series(t *testing.T, reg *telemetry.Registry, name string, index int, table string) *dto.Metric {
	t.Helper()
	return promtest.Series(t, reg, name, promtest.Worker(testTrial.Experiment, testTrial.Trial, replayworker.TypeName, strconv.Itoa(index), "table", table))
}

// replayOp is a request of a test: n items inserted into, sampled from or
// cached (as actor "x") in table.
type replayOp struct {
	table, op string
	n         int
}

func (o replayOp) request() *replaystream.Request {
	r := &replaystream.Request{Op: o.op, Table: o.table, TimeoutMs: 5000}
	switch o.op {
	case replaystream.OpSample:
		r.N = o.n
	case replaystream.OpInsert, replaystream.OpCache:
		r.Items, r.Actor, r.Sum = make([][]byte, o.n), "x", float64(o.n)
		prios := make([]float64, o.n)
		for i := range r.Items {
			r.Items[i], prios[i] = []byte{byte(i)}, 1
		}
		if o.op == replaystream.OpInsert {
			r.Priorities = f64(prios...)
		}
	}
	return r
}

// TestMetricsAgreeWithStats sends the requests of each case to a replay
// worker with two tables, "a" (whose limiter holds samples until it has 4
// items) and "b", in one go (the worker serves them in order), and checks,
// with the worker paused, that each table's series agree with its
// counters in the stats, and the rate limiter's waits with the worker's.
func TestMetricsAgreeWithStats(t *testing.T) {
	ins := func(table string, n int) replayOp { return replayOp{table, replaystream.OpInsert, n} }
	smp := func(table string, n int) replayOp { return replayOp{table, replaystream.OpSample, n} }
	cases := []struct {
		name  string
		ops   []replayOp
		waits int64 // requests of table "a" the limiter held
	}{
		{"inserts and samples", []replayOp{ins("a", 5), ins("b", 3), smp("a", 2), smp("b", 3), smp("a", 1)}, 0},
		{"a sample the limiter holds", []replayOp{smp("a", 2), ins("a", 5), ins("b", 1)}, 1},
		{"caches replace each other", []replayOp{{"b", replaystream.OpCache, 4}, {"b", replaystream.OpCache, 2}, smp("b", 1)}, 0},
	}
	cfg := map[string]any{"tables": []map[string]any{
		{"name": "a", "max_size": 1000, "alpha": 1.0, "beta": 0.5, "limiter": map[string]any{"min_size": 4}},
		{"name": "b", "max_size": 1000, "alpha": 1.0, "beta": 0.5},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			panel := workertest.Panel(t, repo, testTrial)
			reg := telemetry.NewRegistry()
			startReplayWith(t, repo, panel, 0, cfg, reg)
			c := client(t, repo)
			waiting := map[int64]replayOp{}
			for _, o := range tc.ops {
				waiting[send(t, c, 0, o.request())] = o
			}
			eventually.NoError(t, 10*time.Second, "every reply", func() error {
				reps, err := c.Poll()
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range reps {
					if r.Error != nil {
						t.Fatalf("%+v: %v", waiting[r.RID], r.Error)
					}
					delete(waiting, r.RID)
				}
				if len(waiting) > 0 {
					return fmt.Errorf("%d replies missing", len(waiting))
				}
				return nil
			})
			name := names.WorkerName(replayworker.TypeName, 0)
			if err := panel.Request(ctxT(t), name, member.CmdPause, nil, nil); err != nil {
				t.Fatal(err)
			}
			var st struct {
				LimiterWaits int64 `msgpack:"limiter_waits"`
				Tables       map[string]struct {
					Size    int   `msgpack:"size"`
					Inserts int64 `msgpack:"inserts"`
					Samples int64 `msgpack:"samples"`
				} `msgpack:"tables"`
			}
			if err := panel.Request(ctxT(t), name, member.CmdStats, nil, &st); err != nil {
				t.Fatal(err)
			}
			if st.LimiterWaits != tc.waits {
				t.Errorf("limiter_waits %d, want %d", st.LimiterWaits, tc.waits)
			}
			var moved int64
			for _, table := range []string{"a", "b"} {
				tb := st.Tables[table]
				moved += tb.Inserts + tb.Samples
				waits := map[string]int64{"a": tc.waits}[table]
				for _, c := range []struct {
					metric string
					want   float64
				}{
					{"distrl_replay_items", float64(tb.Size)},
					{"distrl_replay_inserts_total", float64(tb.Inserts)},
					{"distrl_replay_samples_total", float64(tb.Samples)},
					{"distrl_replay_rate_limiter_waits_total", float64(waits)},
				} {
					m := series(t, reg, c.metric, 0, table)
					if m == nil {
						t.Fatalf("no %s series of table %s", c.metric, table)
					}
					if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != c.want {
						t.Errorf("%s{table=%q} = %v, want %v (stats %+v)", c.metric, table, got, c.want, st)
					}
				}
			}
			if moved == 0 {
				t.Fatalf("nothing moved: stats %+v", st)
			}
		})
	}
}
