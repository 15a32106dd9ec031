package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/rpc"
)

// BenchmarkWorkerSteady drives one `rlctl worker --type echo` process at
// its maximum request rate (4 clients sending ping, echo and stats back to
// back) for E2E_STEADY_DURATION (default 60s) and samples its resident
// memory, open file descriptors and goroutines every 5 s. It reports the
// first sample (after 5 s) and the last: flat is the bar (benchtab holds
// last against first). One iteration.
func BenchmarkWorkerSteady(b *testing.B) {
	duration := 60 * time.Second
	if s := os.Getenv("E2E_STEADY_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("E2E_STEADY_DURATION: %v", err)
		}
		duration = d
	}
	const every, clients = 5 * time.Second, 4
	c := newCluster(b)
	p := c.worker("echo", 0)
	ctx, cancel := context.WithTimeout(context.Background(), duration+time.Minute)
	defer cancel()
	addr, err := c.repo().Wait(ctx, c.trial.Worker("echo/0"))
	if err != nil {
		b.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	dial := func() *rpc.Client {
		cl, err := rpc.Dial(addr, rpc.ClientOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cl.Close() })
		return cl
	}
	probe := dial()
	type sample struct {
		rss        int64
		fds, gorts int
	}
	take := func() sample {
		var st struct {
			Goroutines int `msgpack:"goroutines"`
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := probe.Request(rctx, "stats", nil, &st); err != nil {
			b.Fatalf("stats: %v", err)
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			b.Fatal(err)
		}
		return sample{rss: rssBytes(b, pid), fds: len(fds), gorts: st.Goroutines}
	}

	var requests, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		cl := dial()
		wg.Add(1)
		go func() {
			defer wg.Done()
			kinds := []struct {
				cmd    string
				kwargs any
			}{{"ping", nil}, {"echo", map[string]any{"msg": "steady", "n": i}}, {"stats", nil}}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := kinds[n%len(kinds)]
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := cl.Request(rctx, k.cmd, k.kwargs, nil); err != nil {
					failures.Add(1)
				}
				cancel()
				requests.Add(1)
			}
		}()
	}
	began := time.Now()
	var samples []sample
	tick := time.NewTicker(every)
	for time.Since(began) < duration {
		<-tick.C
		samples = append(samples, take())
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	elapsed := time.Since(began)
	first, last := samples[0], samples[len(samples)-1]
	for i, s := range samples {
		b.Logf("t=%3ds rss %.1f MB, fds %d, goroutines %d", (i+1)*int(every/time.Second), float64(s.rss)/(1<<20), s.fds, s.gorts)
	}
	const mb = 1 << 20
	b.ReportMetric(float64(requests.Load())/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(failures.Load()), "failures")
	b.ReportMetric(float64(first.rss)/mb, "rss-first-MB")
	b.ReportMetric(float64(last.rss)/mb, "rss-last-MB")
	b.ReportMetric(float64(first.fds), "fds-first")
	b.ReportMetric(float64(last.fds), "fds-last")
	b.ReportMetric(float64(first.gorts), "goroutines-first")
	b.ReportMetric(float64(last.gorts), "goroutines-last")
	b.ReportMetric(0, "ns/op")
}
