package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
)

// BenchmarkMetricsCost is what Prometheus metrics cost a trial: env
// steps/s of cartpole-sink through rlctl start (runs of 3M env steps) in
// three modes, alternating off, served, scraped, off, ... (3 of each; the
// medians):
//
//	off      --no-metrics
//	served   every worker process serves /metrics (rlctl start's default),
//	         nobody scrapes
//	polled   as served, and this benchmark reads the controller's service
//	         discovery (--dashboard) and every target's /metrics every
//	         second: the requests Prometheus makes, without Prometheus
//	scraped  as served, and a real Prometheus on this machine scrapes every
//	         process every second through the controller's service
//	         discovery: its own CPU is taken from the same two cores as
//	         the workers'
//
// Recording is on in all three: a few atomic additions per loop turn, and
// no flag turns it off.
func BenchmarkMetricsCost(b *testing.B) {
	const rounds = 3
	modes := []string{"off", "served", "polled", "scraped"}
	rates := map[string][]float64{}
	for i := range rounds * b.N {
		for _, mode := range modes {
			work := b.TempDir()
			trial := fmt.Sprintf("m%d", i)
			args := []string{"start", "cartpole-sink", trial, "--workdir", work, "--set", "stop.env_steps=3000000"}
			switch mode {
			case "off":
				args = append(args, "--no-metrics")
			case "polled", "scraped":
				args = append(args, "--dashboard", "127.0.0.1:0")
			}
			p := start(b, "rlctl-start", noNameServer, args...)
			stop := func() {}
			switch mode {
			case "polled":
				stop = pollMetrics(b, waitOutput(b, p, dashboardURL, 30*time.Second)[1])
			case "scraped":
				dash := waitOutput(b, p, dashboardURL, 30*time.Second)[1]
				prom := startPrometheus(b, fmt.Sprintf("  - job_name: distrl\n    http_sd_configs:\n      - url: %ssd\n        refresh_interval: 1s\n", dash))
				stop = prom.stop
			}
			if code := p.wait(b, 5*time.Minute); code != 0 {
				b.Fatalf("cartpole-sink exited with %d:\n%s", code, readFile(b, p.log))
			}
			stop()
			lines := readMetricsLines(b, filepath.Join(work, "cartpole-sink", trial, "metrics.jsonl"))
			last := lines[len(lines)-1]
			rate := float64(last.EnvSteps) / last.ElapsedS
			b.Logf("round %d, metrics %s: %.0f env steps/s", i, mode, rate)
			rates[mode] = append(rates[mode], rate)
			os.RemoveAll(work)
		}
	}
	b.ReportMetric(0, "ns/op")
	for _, mode := range modes {
		b.ReportMetric(median(rates[mode]), mode+"-steps/s")
	}
}

// pollMetrics reads the service discovery document at dashboard's /sd and
// every target's /metrics once a second, as Prometheus would, until the
// returned stop is called.
func pollMetrics(b *testing.B, dashboard string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	get := func(url string) []byte {
		resp, err := http.Get(url)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return body
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var groups []telemetry.TargetGroup
			_ = json.Unmarshal(get(dashboard+"sd"), &groups)
			for _, g := range groups {
				for _, target := range g.Targets {
					get("http://" + target + "/metrics")
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
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
