package actorworker_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/worker"
)

// BenchmarkActorInline measures one actor stepping CartPole with its
// policy inline (the default 64x64 network) and samples discarded: the
// cost of simulation, inference and batching without the network.
func BenchmarkActorInline(b *testing.B) {
	for _, ring := range []int{1, 2, 8} {
		b.Run(fmt.Sprint("ring=", ring), func(b *testing.B) {
			repo := workertest.Repo(b)
			impl, err := actorworker.New(worker.Info{Name: "actor/0", Type: actorworker.TypeName, Trial: testTrial, Repo: repo, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer impl.Close()
			if err := impl.Configure(b.Context(), rawArgs(b, map[string]any{
				"inference": "inline", "sample_stream": "null", "ring_size": ring,
			})); err != nil {
				b.Fatal(err)
			}
			var steps int64
			b.ReportAllocs()
			begin := time.Now()
			for steps < int64(b.N) {
				res, err := impl.Poll(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				steps += res.Samples
			}
			b.ReportMetric(float64(steps)/time.Since(begin).Seconds(), "steps/s")
		})
	}
}
