package telemetry

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var actor0 = Identity{Experiment: "exp", Trial: "t1", Type: "actor", Index: 0}

// series is the label set of a series of trial exp/t1 with the label
// pairs kv, as the text exposition writes it (sorted by name).
func series(kv ...string) string {
	labels := map[string]string{"experiment": "exp", "trial": "t1"}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	if _, ok := labels["group"]; !ok && labels["type"] != "" {
		labels["group"] = labels["type"] // a group named after its type
	}
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// scrape returns the text exposition of r.
func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

func TestWorkerSeries(t *testing.T) {
	r := NewRegistry()
	w := r.Worker(actor0)
	w.SetState("READY")
	w.SetState("RUNNING")
	w.Polls.Add(3)
	w.Request("ping", "ok")
	w.Request("ping", "ok")
	w.Request("", "unknown_command")
	a := w.Actor()
	a.EnvSteps.Add(640)
	a.Episodes.Inc()
	a.Return.Set(21.5)
	p := r.Worker(Identity{Experiment: "exp", Trial: "t1", Type: "policy", Index: 2}).Policy()
	p.BatchSize.Observe(64)
	p.Forward.Observe(0.002)
	w.ReplayTable("main").Items.Set(7)
	loop := &Loop{}
	loop.Turned(time.Now().Add(-2 * time.Second))
	w.SetLoop(loop)

	actor := func(extra ...string) string {
		return series(append([]string{"type", "actor", "index", "0"}, extra...)...)
	}
	policy := series("type", "policy", "index", "2")
	out := scrape(t, r)
	for _, want := range []string{
		"distrl_worker_state" + actor("state", "RUNNING") + " 1",
		"distrl_worker_state" + actor("state", "READY") + " 0",
		"distrl_worker_polls_total" + actor() + " 3",
		"distrl_rpc_requests_total" + actor("command", "ping", "outcome", "ok") + " 2",
		"distrl_rpc_requests_total" + actor("command", "unknown", "outcome", "unknown_command") + " 1",
		"distrl_env_steps_total" + actor() + " 640",
		"distrl_episodes_total" + actor() + " 1",
		"distrl_episode_return" + actor() + " 21.5",
		"distrl_inference_batch_size_count" + policy + " 1",
		"distrl_inference_forward_seconds_sum" + policy + " 0.002",
		"distrl_replay_items" + actor("table", "main") + " 7",
		"distrl_loop_heartbeat_age_seconds" + actor() + " ",
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if got := testutil.ToFloat64(a.EnvSteps); got != 640 {
		t.Errorf("env steps %v", got)
	}
}

func TestHeartbeatAge(t *testing.T) {
	r := NewRegistry()
	w := r.Worker(actor0)
	if n := testutil.CollectAndCount(r.heartbeat); n != 0 {
		t.Fatalf("a worker without a loop has %d heartbeat series", n)
	}
	loop := &Loop{}
	w.SetLoop(loop)
	loop.Turned(time.Now().Add(-time.Hour))
	// The age is computed at scrape time: a stuck loop's grows.
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "distrl_loop_heartbeat_age_seconds" {
			if age := mf.GetMetric()[0].GetGauge().GetValue(); age < 3599 {
				t.Errorf("heartbeat age %v, want about an hour", age)
			}
			return
		}
	}
	t.Fatal("no distrl_loop_heartbeat_age_seconds")
}

func TestRemove(t *testing.T) {
	r := NewRegistry()
	w := r.Worker(actor0)
	w.SetState("RUNNING")
	w.Actor().EnvSteps.Inc()
	w.Request("stats", "ok")
	w.Trainer().Loss("policy", 0.5)
	w.SetLoop(&Loop{})
	other := r.Worker(Identity{Experiment: "exp", Trial: "t1", Type: "actor", Index: 1})
	other.Actor().EnvSteps.Inc()
	w.Remove()
	out := scrape(t, r)
	if strings.Contains(out, `index="0"`) {
		t.Errorf("series of a removed worker remain:\n%s", out)
	}
	if !strings.Contains(out, "distrl_env_steps_total"+series("type", "actor", "index", "1")+" 1") {
		t.Error("the other worker's series went too")
	}
	var nilWorker *Worker
	nilWorker.SetState("RUNNING") // a worker without a registry records nothing
	nilWorker.Request("ping", "ok")
	nilWorker.Remove()
}

// Every family follows the conventions docs/metrics.md states: the
// namespace, _total exactly on counters, base units.
func TestNamingConventions(t *testing.T) {
	r := NewRegistry()
	allFamilies(t, r)
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, Namespace+"_") {
			continue
		}
		seen++
		counter := mf.GetType().String() == "COUNTER"
		if counter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s (%s): _total goes on counters and only on them", name, mf.GetType())
		}
		for _, bad := range []string{"_ms", "_milliseconds", "_us", "_kb", "_mb"} {
			if strings.Contains(name, bad) {
				t.Errorf("%s: not a base unit", name)
			}
		}
		for _, m := range mf.GetMetric() {
			got := map[string]bool{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = true
			}
			for _, l := range workerLabels {
				if !got[l] {
					t.Errorf("%s lacks the label %s", name, l)
				}
			}
		}
	}
	if seen < 20 {
		t.Errorf("only %d distrl families exposed", seen)
	}
}

// TestProcessSeries: the process collector reports this process's CPU
// time, resident memory and open descriptors, each plausible.
func TestProcessSeries(t *testing.T) {
	mfs, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if m := mf.GetMetric(); strings.HasPrefix(mf.GetName(), "process_") && len(m) == 1 {
			got[mf.GetName()] = m[0].GetCounter().GetValue() + m[0].GetGauge().GetValue()
		}
	}
	now := float64(time.Now().Unix())
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{"process_cpu_seconds_total", 1e-6, 1e6},
		{"process_resident_memory_bytes", 1 << 20, 1 << 40},
		{"process_open_fds", 3, 1 << 20}, // stdin, stdout, stderr at least
		{"process_start_time_seconds", now - 3600, now + 1},
	} {
		if v, ok := got[c.name]; !ok || v < c.min || v > c.max {
			t.Errorf("%s = %v (reported: %v), want within [%g, %g]", c.name, v, ok, c.min, c.max)
		}
	}
}
