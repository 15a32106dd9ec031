package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/panel"
)

// prometheusBin is Debian's prometheus (make deps installs it).
const prometheusBin = "/usr/bin/prometheus"

// freeLoopbackPort is a port nothing listens on now.
func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// prometheusServer is a real Prometheus started by a test, on loopback.
type prometheusServer struct {
	api  string
	proc *proc
}

// stop ends Prometheus before the test does.
func (p *prometheusServer) stop() {
	_ = p.proc.cmd.Process.Kill()
	<-p.proc.done
}

// startPrometheus runs Prometheus with scrape configs (YAML, indented as a
// list under scrape_configs) and waits until it is ready.
func startPrometheus(t testing.TB, scrapeConfigs string) *prometheusServer {
	t.Helper()
	if _, err := exec.LookPath(prometheusBin); err != nil {
		t.Skipf("no %s (make deps installs Debian's prometheus)", prometheusBin)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"+scrapeConfigs), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	p := &prometheusServer{api: "http://" + addr}
	p.proc = startBinary(t, prometheusBin, "prometheus", nil, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	eventually.NoError(t, 30*time.Second, "prometheus ready", func() error {
		resp, err := http.Get(p.api + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	return p
}

// promSample is one series of an instant query's result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  float64
}

// query runs an instant PromQL query through the HTTP API.
func (p *prometheusServer) query(q string) ([]promSample, error) {
	resp, err := http.Get(p.api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, body.Error)
	}
	out := make([]promSample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", q, r.Value[1])
		}
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// A real Prometheus, configured once with the controller's service
// discovery, finds a live trial's worker processes and scrapes them: a
// PromQL query returns the env step rate of every actor, and the
// controller's own target is up. After an actor is SIGKILLed and
// restarted (on another port), the new process is scraped.
func TestPrometheusScrapesTrial(t *testing.T) {
	c := newCluster(t)
	work := t.TempDir()
	trial := c.trial.Trial
	p := start(t, "rlctl-start", c.env, "start", "cartpole-sink", trial, "--workdir", work,
		"--dashboard", "127.0.0.1:0", "--set", "stop.wall_time=3m", "--set", "stop.env_steps=0")
	dash := waitOutput(t, p, dashboardURL, 30*time.Second)[1]
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	prom := startPrometheus(t, fmt.Sprintf(`  - job_name: distrl
    http_sd_configs:
      - url: %ssd
        refresh_interval: 1s
`, dash))

	steps := fmt.Sprintf(`rate(distrl_env_steps_total{experiment="cartpole-sink",trial=%q}[5s])`, trial)
	eventually.NoError(t, 60*time.Second, "the env step rate of every actor", func() error {
		rates, err := prom.query(steps)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, r := range rates {
			if r.Metric["type"] == "actor" && r.Value > 0 {
				seen[r.Metric["index"]] = true
			}
		}
		if !seen["0"] || !seen["1"] {
			return fmt.Errorf("actors with a positive rate: %v (of %d series)", seen, len(rates))
		}
		return nil
	})
	eventually.NoError(t, 30*time.Second, "the controller's target", func() error {
		up, err := prom.query(`up{process="ctl"}`)
		if err != nil {
			return err
		}
		if len(up) != 1 || up[0].Value != 1 {
			return fmt.Errorf("up{process=\"ctl\"} = %+v", up)
		}
		return nil
	})

	dir := filepath.Join(work, "cartpole-sink", trial)
	old := readRecord(t, dir).Workers["actor/0"]
	cp := panel.New(c.repo(), names.NewTrial("cartpole-sink", trial), panel.Options{})
	defer cp.Close()
	oldAddr := metricsAddr(t, cp, "actor/0", old)
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, regexp.MustCompile(`actor/0 restarted \(pid \d+\)`), 90*time.Second)
	pid := readRecord(t, dir).Workers["actor/0"]
	addr := metricsAddr(t, cp, "actor/0", pid)
	t.Logf("actor/0: pid %d at %s, then pid %d at %s", old, oldAddr, pid, addr)
	eventually.NoError(t, 60*time.Second, "the restarted actor scraped", func() error {
		rates, err := prom.query(fmt.Sprintf(`rate(distrl_env_steps_total{instance=%q}[5s])`, addr))
		if err != nil {
			return err
		}
		if len(rates) != 1 || rates[0].Value <= 0 || rates[0].Metric["index"] != "0" {
			return fmt.Errorf("env step rate of %s: %+v", addr, rates)
		}
		return nil
	})
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, time.Minute); code != 130 {
		t.Errorf("rlctl start exited with %d after SIGINT, want 130", code)
	}
}

// metricsAddr is the metrics address in the status record of worker name
// written by process pid, once there is one.
func metricsAddr(t testing.TB, cp *panel.ControlPanel, name string, pid int) string {
	t.Helper()
	var addr string
	eventually.NoError(t, 30*time.Second, name+"'s status record", func() error {
		ctx := ctxFor(t, 5*time.Second)
		sts, err := cp.Workers(ctx)
		if err != nil {
			return err
		}
		for _, s := range sts {
			if s.Name == name && s.PID == pid && s.Metrics != "" {
				addr = s.Metrics
				return nil
			}
		}
		return fmt.Errorf("no status record of %s (pid %d) naming its metrics", name, pid)
	})
	return addr
}
