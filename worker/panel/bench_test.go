package panel_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/nameresolve"
	wnames "github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/panel"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop() // the embedded etcd of BenchmarkPanelRequest/etcd, if it ran
	os.Exit(code)
}

// startBenchEchoes runs n echo workers in this process, each with its own
// socket and loop, as they would run in n processes, named in an in-memory
// name resolve.
func startBenchEchoes(b *testing.B, n int) (*panel.ControlPanel, []string) {
	b.Helper()
	return startBenchEchoesIn(b, nameresolve.NewMemory(), n)
}

// benchTrials numbers the trials of startBenchEchoesIn: a shared etcd
// outlives each run of a benchmark, and its records must not meet the next.
var benchTrials atomic.Int64

// startBenchEchoesIn is startBenchEchoes with the workers named in repo.
func startBenchEchoesIn(b *testing.B, repo nameresolve.Repository, n int) (*panel.ControlPanel, []string) {
	b.Helper()
	trial := wnames.NewTrial("bench", fmt.Sprint(benchTrials.Add(1)))
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	names := make([]string, n)
	done := make(chan struct{}, n)
	for i := range names {
		w, err := worker.New(ctx, worker.Options{
			Trial: trial, Registry: testTypes, Type: echoworker.TypeName, Index: i, Host: "127.0.0.1", Repo: repo, Logger: quiet,
		})
		if err != nil {
			b.Fatal(err)
		}
		names[i] = w.Name()
		go func() { _ = w.Run(ctx); done <- struct{}{} }()
	}
	p := panel.New(repo, trial, panel.Options{})
	if err := p.Connect(ctx, names...); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		p.Close()
		cancel()
		for range names {
			<-done
		}
		repo.Close()
	})
	return p, names
}

// BenchmarkPanelRequest is one control-panel round trip ("ping") to one
// worker, named in an embedded etcd as users run it (etcd) and in the
// in-memory name resolve of unit tests (memory); rpc's BenchmarkRawREQREP
// is its limit.
func BenchmarkPanelRequest(b *testing.B) {
	for _, name := range []string{"etcd", "memory"} {
		b.Run(name, func(b *testing.B) {
			var repo nameresolve.Repository = nameresolve.NewMemory()
			if name == "etcd" {
				repo = etcdtest.Repo(b)
			}
			benchPanelRequest(b, repo)
		})
	}
}

func benchPanelRequest(b *testing.B, repo nameresolve.Repository) {
	cp, names := startBenchEchoesIn(b, repo, 1)
	ctx := context.Background()
	var lat benchutil.Latencies
	b.ResetTimer()
	lat.Start(b.N)
	for i := 0; i < b.N; i++ {
		lat.Time(func() {
			var pong string
			if err := cp.Request(ctx, names[0], "ping", nil, &pong); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.Report(b, "us")
}

// BenchmarkGroupRequest sends one ping to each of N workers at once;
// BenchmarkSequentialRequests does the same one request at a time.
func BenchmarkGroupRequest(b *testing.B) {
	benchAllWorkers(b, func(ctx context.Context, cp *panel.ControlPanel, names []string) error {
		for _, r := range cp.GroupRequest(ctx, names, "ping", nil) {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	})
}

func BenchmarkSequentialRequests(b *testing.B) {
	benchAllWorkers(b, func(ctx context.Context, cp *panel.ControlPanel, names []string) error {
		for _, w := range names {
			if err := cp.Request(ctx, w, "ping", nil, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchAllWorkers times op, which pings every one of 64 or 256 workers.
func benchAllWorkers(b *testing.B, op func(context.Context, *panel.ControlPanel, []string) error) {
	for _, n := range []int{64, 256} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cp, names := startBenchEchoes(b, n)
			ctx := context.Background()
			var lat benchutil.Latencies
			b.ResetTimer()
			lat.Start(b.N)
			for i := 0; i < b.N; i++ {
				lat.Time(func() {
					if err := op(ctx, cp, names); err != nil {
						b.Fatal(err)
					}
				})
			}
			lat.Report(b, "ms")
		})
	}
}
