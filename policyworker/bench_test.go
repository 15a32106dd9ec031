package policyworker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// benchCases are the batches of the policy benchmarks, on one thread
// ("batch=N") and spread over several ("threads=T/batch=N": the policy
// worker's threads setting; on a 2-core machine two leave the client's
// core to the forward pass while the client waits, and 4 is what "auto"
// gives a 16-core machine).
var benchCases = []struct {
	name           string
	batch, threads int
}{
	{"batch=1", 1, 1}, {"batch=8", 8, 1}, {"batch=64", 64, 1}, {"batch=512", 512, 1},
	{"threads=2/batch=512", 512, 2}, {"threads=2/batch=4096", 4096, 2}, {"threads=4/batch=4096", 4096, 4},
}

// BenchmarkPolicyWorker measures the full inference path for one actor:
// a RemoteInferenceClient posts a batch of CartPole observations and
// flushes them as one request, the policy worker's loop takes it off its
// ROUTER socket, runs the policy and replies, and the client collects
// every answer. rows/s against the batch size shows how far batching
// amortises the per-message cost; BenchmarkPolicyInfer is the ceiling.
// cpu-ns/row is the CPU time of the whole process (client, worker loop,
// libzmq's threads) per row: on a shared machine the steadier figure.
func BenchmarkPolicyWorker(b *testing.B) {
	for _, bc := range benchCases {
		n := bc.batch
		b.Run(bc.name, func(b *testing.B) {
			repo := workertest.Repo(b)
			f := startWorker(b, repo, 0, worker.DefaultIdleWait, slog.New(slog.DiscardHandler))
			f.do(b, member.CmdConfigure, map[string]any{"env": env.CartPoleName, "max_batch": n, "threads": bc.threads}, nil)
			f.do(b, member.CmdStart, nil, nil)
			c := newClient(b, repo, 4, 5*time.Second)
			w := newWaiter(c)
			obs := cartPoleObs(1, n)
			mustRoundTrip(b, c, w, obs) // connect before timing
			ids := make([]stream.ReqID, n)
			ctx := context.Background()

			var cpu benchutil.CPUMeter
			cpu.Start()
			for b.Loop() {
				for i, o := range obs {
					id, err := c.Post(o)
					if err != nil {
						b.Fatal(err)
					}
					ids[i] = id
				}
				if err := c.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				// Replies to one request arrive together, so waiting for
				// the last id waits for all of them.
				for !c.Ready(ids[n-1]) {
					if err := w.wait(time.Second); err != nil {
						b.Fatal(err)
					}
					if err := c.Poll(); err != nil {
						b.Fatal(err)
					}
				}
				for _, id := range ids {
					if _, err := c.Consume(id); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
			cpu.Report(b, n*b.N, "row")
		})
	}
}

// BenchmarkPolicyInfer is policy.ActorCritic.Infer alone on the batch
// sizes of BenchmarkPolicyWorker: the rate the worker would reach if the
// network and the loop cost nothing.
func BenchmarkPolicyInfer(b *testing.B) {
	cfg, err := policy.ConfigForEnv(env.CartPoleName, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchCases {
		n := bc.batch
		b.Run(bc.name, func(b *testing.B) {
			cfg := cfg
			cfg.Threads = bc.threads
			p, err := policy.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			obs := api.NewTensor[float32](n, cfg.ObsDim)
			for i, o := range cartPoleObs(1, n) {
				copy(obs.Row(i), o)
			}
			var out api.Inference
			for b.Loop() {
				if err := p.Infer(obs, &out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
