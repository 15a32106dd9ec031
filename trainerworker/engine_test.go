package trainerworker_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker"
)

// cpuAsCUDA is a binary's engines with nn's CPU engine standing in for
// "cuda": the learner's engine path (observations in, outputs out, their
// gradient in, parameters back after every update) runs here, as it does
// on a GPU, whose kernels nn/cuda's tests compare with the CPU.
var cpuAsCUDA = trainerworker.Engines{"cuda": func(int) nn.OpenEngine { return nn.NewCPUEngine }}

// TestTrainsOnAnEngine: a trainer with device cuda:0 trains and publishes
// through its engine, its checkpoint resumes on a trainer on the CPU at
// the same version and parameters, and the CPU trainer's checkpoint on the
// engine again.
func TestTrainsOnAnEngine(t *testing.T) { checkTrainsOnAnEngine(t, cpuAsCUDA) }

// checkTrainsOnAnEngine is TestTrainsOnAnEngine with the binary's engines.
func checkTrainsOnAnEngine(t *testing.T, engines trainerworker.Engines) {
	c := newCluster(t)
	types := workertest.Registry(map[string]worker.Factory{trainerworker.TypeName: trainerworker.NewFactory(engines)})
	start := func() *workertest.Running {
		return workertest.StartChecked(t, worker.Options{
			Trial: testTrial, Registry: types, Type: trainerworker.TypeName, Host: "127.0.0.1", Repo: c.repo,
			IdleWait: 20 * time.Millisecond, Logger: testLogger(t), Metrics: c.metrics,
		})
	}
	dir := t.TempDir()
	onGPU := map[string]any{"batch_steps": 50, "checkpoint_dir": dir, "checkpoint_every": 1, "seed": 3, "device": "cuda:0"}
	onCPU := map[string]any{"batch_steps": 50, "checkpoint_dir": dir, "checkpoint_every": 1, "seed": 3}
	prod := newProducer(t, c.repo)
	sub := newSubscriber(t, c.repo)
	rng := rand.New(rand.NewPCG(9, 10))
	var last []float32 // the parameters the previous trainer published last
	for i, cfg := range []map[string]any{onGPU, onCPU, onGPU} {
		tr := start()
		c.run(t, tr.Name(), cfg)
		var st struct {
			Version int64  `msgpack:"version"`
			Device  string `msgpack:"device"`
		}
		c.request(t, tr.Name(), "stats", nil, &st)
		if want := cmp.Or(cfg["device"], any("cpu")); st.Version != int64(3*i) || st.Device != want {
			t.Fatalf("trainer %d starts at version %d on %q, want %d on %q", i, st.Version, st.Device, 3*i, want)
		}
		if p := fetchVersion(t, sub, int64(3*i)); i == 0 {
			last = p.Data
		} else if !slices.Equal(p.Data, last) {
			t.Fatalf("trainer %d (%v) resumed with other parameters than its predecessor published", i, cfg["device"])
		}
		trainTo(t, c, tr.Name(), prod, rng, 50, int64(3*i+3))
		p := fetchVersion(t, sub, int64(3*i+3))
		if slices.Equal(p.Data, last) {
			t.Fatalf("trainer %d (%v): version %d has the parameters of version %d", i, cfg["device"], p.Version, 3*i)
		}
		last = p.Data
		if err := tr.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}
