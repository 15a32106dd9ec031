package worker_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// value is the value of the counter or gauge series of family name whose
// labels include want, and whether there is one.
func value(t *testing.T, reg *telemetry.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	m := promtest.Series(t, reg, name, want)
	return promtest.Value(m), m != nil
}

// The base records every worker's lifecycle, polls and requests in the
// process's registry, names the metrics address in the status record, and
// removes the worker's series when it exits.
func TestWorkerMetrics(t *testing.T) {
	repo := workertest.Repo(t)
	reg := telemetry.NewRegistry()
	r := workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: "scripted", Index: 3, Host: "127.0.0.1", Repo: repo,
		IdleWait: 10 * time.Millisecond, Logger: workertest.Logger(t, slog.LevelInfo),
		Metrics: reg, MetricsAddr: "127.0.0.1:9999",
	})
	cp := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	id := map[string]string{"experiment": testTrial.Experiment, "trial": testTrial.Trial, "type": "scripted", "index": "3"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range id {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	if v, _ := value(t, reg, "distrl_worker_state", with("state", "READY")); v != 1 {
		t.Errorf("READY = %v before configure", v)
	}
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart, "nope"} {
		_ = cp.Request(ctx, r.Name(), cmd, nil, nil)
	}
	st := workertest.WaitState(t, cp, r.Name(), member.StateRunning)
	if st.Metrics != "127.0.0.1:9999" {
		t.Errorf("status record names metrics %q", st.Metrics)
	}
	eventually.NoError(t, 5*time.Second, "polls counted", func() error {
		if v, _ := value(t, reg, "distrl_worker_polls_total", id); v < 3 {
			return fmt.Errorf("%v polls", v)
		}
		return nil
	})
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"distrl_worker_state", with("state", "RUNNING"), 1},
		{"distrl_worker_state", with("state", "READY"), 0},
		{"distrl_rpc_requests_total", with("command", "configure", "outcome", "ok"), 1},
		{"distrl_rpc_requests_total", with("command", "start", "outcome", "ok"), 1},
		{"distrl_rpc_requests_total", with("command", "unknown", "outcome", "unknown_command"), 1},
	} {
		if got, ok := value(t, reg, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if age, ok := value(t, reg, "distrl_loop_heartbeat_age_seconds", id); !ok || age > 5 {
		t.Errorf("heartbeat age %v (present %v) of a running loop", age, ok)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, ok := value(t, reg, "distrl_worker_polls_total", id); ok {
		t.Error("the series of an exited worker remain")
	}
}
