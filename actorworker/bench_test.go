package actorworker_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/internal/testsupport/pytest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/pyenv"
	"github.com/distrl/distrl/worker"
)

// BenchmarkActorInline measures one actor stepping CartPole with its
// policy inline (the default 64x64 network) and samples discarded: the
// cost of simulation, inference and batching without the network. The
// python cases step the Python CartPole of distrl.examples in one host
// process per actor, a turn of the ring per message.
func BenchmarkActorInline(b *testing.B) {
	cases := []struct {
		name   string
		ring   int
		python bool
	}{{"ring=1", 1, false}, {"ring=2", 2, false}, {"ring=8", 8, false}, {"python-ring=8", 8, true}, {"python-ring=64", 64, true}}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cfg := map[string]any{"inference": "inline", "sample_stream": "null", "ring_size": c.ring}
			if c.python {
				cfg["env"] = pyenv.Name
				cfg["env_config"] = map[string]any{"python": pytest.Python(b), "module": "distrl.examples.cartpole"}
			}
			repo := workertest.Repo(b)
			impl, err := actorworker.New(worker.Info{Name: "actor/0", Type: actorworker.TypeName, Trial: testTrial, Repo: repo, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer impl.Close()
			if err := impl.Configure(b.Context(), workertest.Args(b, cfg)); err != nil {
				b.Fatal(err)
			}
			var steps int64
			b.ReportAllocs()
			b.ResetTimer() // a Python host takes a while to start
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
