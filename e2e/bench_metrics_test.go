package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/worker/member"
)

// BenchmarkMetricsCost is what serving Prometheus metrics costs a trial:
// env steps/s of cartpole-sink through rlctl start with metrics on (every
// worker process serving /metrics, a real Prometheus scraping each one
// every second through the controller's service discovery) and off
// (--no-metrics), in runs of 3M env steps that alternate on, off, on, ...
// (3 of each; the medians). Recording itself is on in both: it is a few
// atomic additions per loop turn, and no flag turns it off.
func BenchmarkMetricsCost(b *testing.B) {
	const pairs = 3
	var on, off []float64
	for i := range pairs * b.N {
		for _, metrics := range []bool{true, false} {
			work := b.TempDir()
			trial := fmt.Sprintf("m%d", i)
			args := []string{"start", "cartpole-sink", trial, "--workdir", work, "--set", "stop.env_steps=3000000"}
			if metrics {
				args = append(args, "--dashboard", "127.0.0.1:0")
			} else {
				args = append(args, "--no-metrics")
			}
			p := start(b, "rlctl-start", noNameServer, args...)
			var prom *prometheusServer
			if metrics {
				dash := waitOutput(b, p, dashboardURL, 30*time.Second)[1]
				prom = startPrometheus(b, fmt.Sprintf("  - job_name: distrl\n    http_sd_configs:\n      - url: %ssd\n        refresh_interval: 1s\n", dash))
			}
			if code := p.wait(b, 5*time.Minute); code != 0 {
				b.Fatalf("cartpole-sink exited with %d:\n%s", code, readFile(b, p.log))
			}
			if prom != nil {
				prom.stop()
			}
			lines := readMetricsLines(b, filepath.Join(work, "cartpole-sink", trial, "metrics.jsonl"))
			last := lines[len(lines)-1]
			rate := float64(last.EnvSteps) / last.ElapsedS
			b.Logf("run %d, metrics %v: %.0f env steps/s", i, metrics, rate)
			if metrics {
				on = append(on, rate)
			} else {
				off = append(off, rate)
			}
			os.RemoveAll(work)
		}
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(on), "on-steps/s")
	b.ReportMetric(median(off), "off-steps/s")
}

// BenchmarkScrapeHosted is one scrape of the /metrics of a process
// hosting 256 running echo workers (rlctl worker --count 256 --metrics):
// its time (median of b.N) and payload.
func BenchmarkScrapeHosted(b *testing.B) {
	const n = 256
	c := newCluster(b).benchTrial(b)
	ctx := ctxFor(b, 5*time.Minute)
	cp, names := c.hostedEchoes(b, ctx, n, "--metrics", "127.0.0.1:0")
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart, member.CmdStats} {
		for _, r := range cp.GroupRequest(ctx, names, cmd, nil) {
			if r.Err != nil {
				b.Fatalf("%s %s: %v", cmd, r.Worker, r.Err)
			}
		}
	}
	sts, err := cp.Workers(ctx)
	if err != nil || len(sts) == 0 || sts[0].Metrics == "" {
		b.Fatalf("status records: %v (%d)", err, len(sts))
	}
	url := "http://" + sts[0].Metrics + "/metrics"
	scrape := func() int {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return len(body)
	}
	size := scrape()
	var lat benchutil.Latencies
	b.ResetTimer()
	lat.Start(b.N)
	for range b.N {
		lat.Time(func() { scrape() })
	}
	b.StopTimer()
	lat.ReportRate(b, "ms", b.N, "scrapes/s")
	b.ReportMetric(float64(size)/1024, "payload-KiB")
}
