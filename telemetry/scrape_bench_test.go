package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkScrape is one scrape, as Prometheus makes it (gzip accepted),
// of a registry holding n echo workers' series, as a process hosting them
// has (states, polls, requests by command): the handler's own cost,
// without a loop competing for the cores (e2e.BenchmarkScrapeHosted has
// that). "stock" is promhttp's defaults with a timeout (gzip, the response
// buffered, a prometheus.Registry's Gather) over the same collectors;
// "served" is Handler (gather.go and expose.go).
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1, 256} {
		r := benchRegistry(n)
		for _, h := range []struct {
			name    string
			handler http.Handler
		}{
			{"stock", promhttp.HandlerFor(r.stockRegistry(), promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second, EnableOpenMetrics: true})},
			{"served", r.Handler()},
		} {
			b.Run("workers="+strconv.Itoa(n)+"/"+h.name, func(b *testing.B) {
				srv := httptest.NewServer(h.handler)
				defer srv.Close()
				var size int64
				b.ReportAllocs()
				for b.Loop() {
					resp, err := http.Get(srv.URL + "/metrics") // the client asks for gzip
					if err != nil {
						b.Fatal(err)
					}
					size, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				b.ReportMetric(float64(size)/1024, "payload-KiB")
			})
		}
	}
}

// BenchmarkProcessCollector is one collection of the process_* series:
// client_golang's collector against this package's.
func BenchmarkProcessCollector(b *testing.B) {
	for _, c := range []struct {
		name string
		c    prometheus.Collector
	}{
		{"client_golang", collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
		{"distrl", newProcessCollector()},
	} {
		b.Run(c.name, func(b *testing.B) {
			ch := make(chan prometheus.Metric, 64)
			b.ReportAllocs()
			for b.Loop() {
				c.c.Collect(ch)
				for len(ch) > 0 {
					<-ch
				}
			}
		})
	}
}

// benchRegistry is a registry with n running echo workers' series.
func benchRegistry(n int) *Registry {
	r := NewRegistry()
	loop := &Loop{}
	loop.Turned(time.Now())
	for i := range n {
		w := r.Worker(Identity{Experiment: "bench", Trial: "t", Type: "echo", Index: i})
		w.SetLoop(loop)
		for _, s := range []string{"READY", "CONFIGURED", "RUNNING"} {
			w.SetState(s)
		}
		for _, c := range []string{"configure", "start", "stats", "status", "echo"} {
			w.Request(c, "ok")
		}
		w.Polls.Add(1000)
	}
	return r
}

// stockRegistry is a prometheus.Registry of r's collectors, the distrl
// families included: what serving them with client_golang alone costs.
func (r *Registry) stockRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), newProcessCollector())
	for _, f := range r.fams {
		reg.MustRegister(f.c)
	}
	return reg
}
