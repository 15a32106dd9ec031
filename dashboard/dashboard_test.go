package dashboard_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/dashboard"
	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/promtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

var testTypes = workertest.Registry(map[string]worker.Factory{echoworker.TypeName: echoworker.New})

// trial is an in-process trial: a running echo worker, a HUNG actor/1 (its
// address lives, its loop has not turned for an hour) and a LOST actor/2
// (its status says RUNNING, its address is gone), and the trial directory
// a controller would have written.
type trial struct {
	names   names.Trial
	dir     controller.TrialDir
	src     *dashboard.TrialSource
	started time.Time
	// metrics is the echo worker's registry: what it was asked.
	metrics *telemetry.Registry
}

const configText = "name: unit\nworkers:\n  echo:\n    count: 1\n"

func newTrial(t *testing.T) *trial {
	t.Helper()
	tr := &trial{names: names.NewTrial("unit", "t1"), dir: controller.TrialDir(t.TempDir()), started: time.Now().Add(-time.Minute),
		metrics: telemetry.NewRegistry()}
	repo := workertest.Repo(t)
	echo := workertest.Start(t, worker.Options{
		Trial: tr.names, Registry: testTypes, Type: echoworker.TypeName, Index: 0, Host: "127.0.0.1", Repo: repo,
		IdleWait: 10 * time.Millisecond, Logger: workertest.Logger(t, slog.LevelWarn), MetricsAddr: "127.0.0.1:9100",
		Metrics: tr.metrics,
	})
	cp := workertest.Panel(t, repo, tr.names)
	ctx := workertest.Ctx(t, 10*time.Second)
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart} {
		if err := cp.Request(ctx, echo.Name(), cmd, map[string]any{}, nil); err != nil {
			t.Fatalf("%s %s: %v", cmd, echo.Name(), err)
		}
	}
	workertest.WaitState(t, cp, echo.Name(), member.StateRunning)
	put := func(key, value string) {
		if err := repo.Add(ctx, key, value, nameresolve.AddOptions{Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour).UnixMilli()
	hung := member.Status{Name: "actor/1", State: member.StateRunning, Host: "node-a", PID: 4101, UpdatedMs: old,
		Loop: "actor/1", Metrics: "127.0.0.1:9101"}
	put(tr.names.Worker("actor/1"), "tcp://127.0.0.1:1")
	put(tr.names.Status("actor/1"), hung.Record())
	put(tr.names.Loop("actor/1"), member.LoopRecord{Loops: 7, HeartbeatMs: old, Workers: 1}.Record())
	lost := member.Status{Name: "actor/2", State: member.StateRunning, Host: "node-b", PID: 4102, UpdatedMs: old,
		Metrics: "127.0.0.1:9102"}
	put(tr.names.Status("actor/2"), lost.Record())

	tr.writeRecord(t, map[string]int{"actor/1": 2})
	if err := os.WriteFile(tr.dir.Path(controller.ConfigFile), []byte(configText), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		tr.appendMetrics(t, i)
	}
	if err := os.MkdirAll(tr.dir.Path(controller.LogsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&log, "line %04d of actor/1\n", i)
	}
	if err := os.WriteFile(tr.dir.Log("actor/1"), []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tr.src = dashboard.NewTrialSource(tr.dir, "unit", "t1", dashboard.PanelConnector(cp))
	t.Cleanup(func() { tr.src.Close() })
	return tr
}

func (tr *trial) writeRecord(t *testing.T, restarts map[string]int) {
	t.Helper()
	rec := controller.Record{PID: os.Getpid(), Host: "here", Experiment: "unit", Trial: "t1", State: controller.StateRunning,
		Started: tr.started, Workers: map[string]int{"echo/0": os.Getpid(), "actor/1": 4101, "actor/2": 4102}, Restarts: restarts}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tr.dir.Path(controller.RecordFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// appendMetrics appends metrics line i: i*100 env steps, a mean return
// and a policy lag from the second on.
func (tr *trial) appendMetrics(t *testing.T, i int) {
	t.Helper()
	m := controller.Metrics{Time: tr.started.Add(time.Duration(i) * time.Second), ElapsedS: float64(i),
		EnvSteps: int64(i * 100), StepsPerS: 100, Workers: map[string]map[string]any{"actor/1": {"state": "RUNNING"}}}
	if i > 1 {
		r, lag, dropped := float64(10*i), 0.5, 0.25
		m.MeanReturn, m.PolicyLag, m.DroppedShare = &r, &lag, &dropped
	}
	b, _ := json.Marshal(m)
	f, err := os.OpenFile(tr.dir.Path(controller.MetricsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// get requests path of h and returns the status and body.
func get(t *testing.T, h http.Handler, path string, header ...string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}

func getJSON(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	code, body, _ := get(t, h, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

func TestTrialAPI(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{})
	var snap dashboard.Snapshot
	getJSON(t, h, "/api/trial", &snap)
	if snap.Experiment != "unit" || snap.Trial != "t1" || snap.Controller.State != controller.StateRunning ||
		snap.Controller.Restarts != 2 || snap.Config != configText || snap.Problem != "" {
		t.Errorf("snapshot: %+v", snap)
	}
	if snap.Last == nil || snap.Last.EnvSteps != 300 || snap.Last.MeanReturn == nil || *snap.Last.MeanReturn != 30 {
		t.Errorf("last point: %+v", snap.Last)
	}
	byName := map[string]dashboard.Worker{}
	var order []string
	for _, w := range snap.Workers {
		byName[w.Name] = w
		order = append(order, w.Name)
	}
	if got := strings.Join(order, " "); got != "actor/1 actor/2 echo/0" {
		t.Errorf("workers %q, want actor/1 actor/2 echo/0 (no ctl, by type and index)", got)
	}
	if w := byName["actor/1"]; w.State != "HUNG" || w.Restarts != 2 || w.Host != "node-a" || w.PID != 4101 ||
		w.Type != "actor" || w.Index != 1 || !strings.Contains(w.Error, "loop has not turned") {
		t.Errorf("actor/1: %+v, want HUNG with 2 restarts", w)
	}
	if w := byName["actor/2"]; w.State != "LOST" || !strings.Contains(w.Error, "address lease gone") {
		t.Errorf("actor/2: %+v, want LOST", w)
	}
	if w := byName["echo/0"]; w.State != "RUNNING" || w.PID != os.Getpid() || w.Stats == nil {
		t.Errorf("echo/0: %+v, want RUNNING with stats", w)
	}
}

func TestHistoryIncremental(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{})
	var all, tail dashboard.History
	getJSON(t, h, "/api/history", &all)
	if len(all.Points) != 3 || all.Next != 3 || all.Total != 3 || all.Points[0].MeanReturn != nil ||
		all.Points[2].EnvSteps != 300 || *all.Points[2].PolicyLag != 0.5 {
		t.Fatalf("history: %+v", all)
	}
	getJSON(t, h, "/api/history?since=2", &tail)
	if len(tail.Points) != 1 || tail.Since != 2 || tail.Points[0].EnvSteps != 300 || tail.Run != all.Run {
		t.Fatalf("since=2: %+v", tail)
	}
	// A line still being written is not a point yet.
	tr.appendMetrics(t, 4)
	f, err := os.OpenFile(tr.dir.Path(controller.MetricsFile), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"time":"2025-01-01T00:00:00Z","env_st`)
	f.Close()
	getJSON(t, h, "/api/history?since=3", &tail)
	if len(tail.Points) != 1 || tail.Points[0].EnvSteps != 400 || tail.Total != 4 {
		t.Fatalf("after a line and a half: %+v", tail)
	}
	// A new run of the trial starts metrics.jsonl over: so does the history.
	tr.started = time.Now()
	tr.writeRecord(t, nil)
	if err := os.Remove(tr.dir.Path(controller.MetricsFile)); err != nil {
		t.Fatal(err)
	}
	tr.appendMetrics(t, 1)
	getJSON(t, h, "/api/history?since=4", &tail)
	if tail.Run == all.Run || tail.Total != 1 || len(tail.Points) != 0 {
		t.Fatalf("new run: %+v (first run %d)", tail, all.Run)
	}
	if _, body, _ := get(t, h, "/api/history?since=1"); !strings.Contains(body, `"points":[]`) {
		t.Errorf("no points are not []: %s", body)
	}
}

func TestLogTail(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{})
	code, body, hd := get(t, h, "/api/log?worker=actor/1&bytes=100")
	if code != http.StatusOK || !strings.HasPrefix(hd.Get("Content-Type"), "text/plain") {
		t.Fatalf("log: %d %s", code, body)
	}
	if !strings.HasSuffix(body, "line 4999 of actor/1\n") || !strings.HasPrefix(body, "line ") || len(body) > 100 {
		t.Errorf("tail of 100 bytes from a line start: %q", body)
	}
	_, body, _ = get(t, h, "/api/log?worker=actor/1&bytes=10000000")
	if len(body) > dashboard.MaxLogBytes || len(body) < dashboard.MaxLogBytes-100 {
		t.Errorf("a huge bytes= gave %d bytes, want the bound %d", len(body), dashboard.MaxLogBytes)
	}
	// A worker without a log yet: empty.
	if code, body, _ := get(t, h, "/api/log?worker=echo/0"); code != http.StatusOK || body != "" {
		t.Errorf("echo/0 log: %d %q", code, body)
	}
	if err := os.WriteFile(tr.dir.Path("secret.log"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"", "ctl", "actor/9", "../secret", "actor/1/../../secret", "..%2Fsecret", "actor/-1", "/etc/passwd"} {
		code, body, _ := get(t, h, "/api/log?worker="+w)
		if code != http.StatusNotFound || body == "secret" {
			t.Errorf("log of %q: %d %q, want 404", w, code, body)
		}
	}
	if code, _, _ := get(t, h, "/api/log?worker=actor/1&bytes=-5"); code != http.StatusBadRequest {
		t.Errorf("bytes=-5: %d, want 400", code)
	}
}

func TestServiceDiscovery(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{Self: "127.0.0.1:8080"})
	var groups []telemetry.TargetGroup
	getJSON(t, h, "/sd", &groups)
	got := map[string]map[string]string{}
	for _, g := range groups {
		if len(g.Targets) != 1 {
			t.Fatalf("group %+v: want one target", g)
		}
		got[g.Targets[0]] = g.Labels
	}
	// actor/2 is LOST: no target; the HUNG actor/1 still is one.
	if len(got) != 3 || got["127.0.0.1:9100"][telemetry.LabelWorkers] != "echo/0" ||
		got["127.0.0.1:9101"][telemetry.LabelWorkers] != "actor/1" || got["127.0.0.1:8080"][telemetry.LabelProcess] != "ctl" ||
		got["127.0.0.1:8080"][telemetry.LabelTrial] != "t1" || got["127.0.0.1:9100"][telemetry.LabelExperiment] != "unit" {
		t.Errorf("sd: %+v", groups)
	}
}

// Prometheus's service discovery refreshes and its scrapes of the trial's
// metrics ask no worker anything; the page's table asks each for its stats.
func TestScrapesAskNoWorker(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{})
	statsAsked := func() float64 {
		labels := promtest.Worker("unit", "t1", echoworker.TypeName, "0", "command", member.CmdStats)
		return promtest.Value(promtest.Series(t, tr.metrics, "distrl_rpc_requests_total", labels))
	}
	for _, path := range []string{"/sd", "/metrics", "/sd", "/metrics"} {
		if code, body, _ := get(t, h, path); code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		time.Sleep(600 * time.Millisecond) // past the snapshot's reuse
	}
	if n := statsAsked(); n != 0 {
		t.Errorf("echo/0 was asked for its stats %v times by /sd and /metrics", n)
	}
	if code, body, _ := get(t, h, "/api/trial"); code != http.StatusOK {
		t.Fatalf("/api/trial: %d %s", code, body)
	}
	if n := statsAsked(); n != 1 {
		t.Errorf("echo/0 was asked for its stats %v times by /api/trial, want 1", n)
	}
}

func TestTrialMetrics(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{})
	code, body, _ := get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`distrl_trial_env_steps_total{experiment="unit",trial="t1"} 300`,
		`distrl_trial_mean_return{experiment="unit",trial="t1"} 30`,
		`distrl_trial_dropped_share{experiment="unit",trial="t1"} 0.25`,
		`distrl_trial_workers{experiment="unit",state="HUNG",trial="t1"} 1`,
		`distrl_trial_workers{experiment="unit",state="LOST",trial="t1"} 1`,
		`distrl_trial_workers{experiment="unit",state="RUNNING",trial="t1"} 1`,
		`distrl_trial_workers{experiment="unit",state="ERROR",trial="t1"} 0`,
		`distrl_trial_worker_restarts_total{experiment="unit",group="actor",index="1",trial="t1",type="actor"} 2`,
		`distrl_trial_restarts_total{experiment="unit",trial="t1"} 2`,
		"# TYPE distrl_trial_env_steps_per_second gauge",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

func TestPage(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{})
	code, body, hd := get(t, h, "/")
	if code != http.StatusOK || !strings.Contains(body, `id="workers"`) || !strings.HasPrefix(hd.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %.200s", code, body)
	}
	if strings.Contains(body, "http://") && regexp.MustCompile(`(src|href)="https?://`).MatchString(body) {
		t.Error("the page loads something from elsewhere")
	}
	// The policy admits exactly the inline script and style.
	csp := hd.Get("Content-Security-Policy")
	for _, tag := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no inline %s", tag)
		}
		sum := sha256.Sum256([]byte(m[1]))
		if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, tag+"-src "+want) {
			t.Errorf("CSP %q does not admit the inline %s (%s)", csp, tag, want)
		}
	}
	for _, p := range []string{"/nope", "/api/nope", "/index.html"} {
		if code, _, _ := get(t, h, p); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
}

func TestTokenRequired(t *testing.T) {
	tr := newTrial(t)
	h := dashboard.New(tr.src, dashboard.Options{Token: "s3cret"})
	for _, c := range []struct {
		path   string
		header []string
		want   int
	}{
		{"/api/trial", nil, http.StatusUnauthorized},
		{"/", nil, http.StatusUnauthorized},
		{"/metrics", nil, http.StatusUnauthorized},
		{"/sd", []string{"Authorization", "Bearer wrong"}, http.StatusUnauthorized},
		{"/api/trial?token=s3cre", nil, http.StatusUnauthorized},
		{"/api/trial?token=s3cret", nil, http.StatusOK},
		{"/?token=s3cret", nil, http.StatusOK},
		{"/api/trial", []string{"Authorization", "Bearer s3cret"}, http.StatusOK},
		{"/sd", []string{"Authorization", "Bearer s3cret"}, http.StatusOK},
	} {
		code, body, _ := get(t, h, c.path, c.header...)
		if code != c.want {
			t.Errorf("GET %s %v: %d, want %d", c.path, c.header, code, c.want)
		}
		if code == http.StatusUnauthorized && strings.Count(strings.TrimSpace(body), "\n") != 0 {
			t.Errorf("401 body is not one line: %q", body)
		}
	}
}

// A dashboard bound beyond loopback makes a token and requires it; on
// loopback it requires none.
func TestListenTokenPolicy(t *testing.T) {
	tr := newTrial(t)
	open, err := dashboard.Listen("127.0.0.1:0", tr.src, dashboard.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if open.Token() != "" || open.URL() != "http://"+open.Addr()+"/" {
		t.Errorf("loopback: token %q, URL %s", open.Token(), open.URL())
	}
	if code := httpGet(t, "http://"+open.Addr()+"/api/trial", ""); code != http.StatusOK {
		t.Errorf("loopback without a token: %d", code)
	}

	wide, err := dashboard.Listen("0.0.0.0:0", tr.src, dashboard.ServeOptions{Advertise: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(wide.Token()) {
		t.Fatalf("token %q: want 128 bits in hex", wide.Token())
	}
	_, port, _ := net.SplitHostPort(wide.Addr())
	base := "http://127.0.0.1:" + port
	if want := base + "/?token=" + wide.Token(); wide.URL() != want {
		t.Errorf("URL %s, want %s", wide.URL(), want)
	}
	if code := httpGet(t, base+"/api/trial", ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
	if code := httpGet(t, base+"/api/trial", wide.Token()); code != http.StatusOK {
		t.Errorf("with the token: %d, want 200", code)
	}
	if code := httpGet(t, wide.URL(), ""); code != http.StatusOK {
		t.Errorf("the printed URL: %d, want 200", code)
	}
}

func httpGet(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestMain(m *testing.M) { workertest.Main(m) }
