package trainerworker_test

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// TestMain registers the environments the tests' workers name, as rlctl
// does at start.
func TestMain(m *testing.M) { workertest.Main(m) }

// testTypes are the worker types these tests run.
var testTypes = workertest.Registry(map[string]worker.Factory{
	trainerworker.TypeName: trainerworker.New,
	policyworker.TypeName:  policyworker.New,
	actorworker.TypeName:   actorworker.New,
	replayworker.TypeName:  replayworker.New,
})

var testTrial = names.NewTrial("unit", "trainerworker")

// testLogger sends logs to the test's log, shown on failure or with -v.
func testLogger(t testing.TB) *slog.Logger { return workertest.Logger(t, slog.LevelInfo) }

// cluster is workers running in-process on one in-memory name resolve,
// driven through a control panel, that record into the registry metrics,
// as the workers of a process do.
type cluster struct {
	repo    nameresolve.Repository
	panel   *panel.ControlPanel
	metrics *telemetry.Registry
}

func newCluster(t testing.TB) *cluster {
	repo := workertest.Repo(t)
	return &cluster{repo: repo, panel: workertest.Panel(t, repo, testTrial), metrics: telemetry.NewRegistry()}
}

// start runs worker typ/index until the test ends (or its Stop) and returns
// it. A worker that ends in ERROR fails the test.
func (c *cluster) start(t testing.TB, typ string, index int) *workertest.Running {
	t.Helper()
	return workertest.StartChecked(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: typ, Index: index, Host: "127.0.0.1", Repo: c.repo,
		IdleWait: 20 * time.Millisecond, Logger: testLogger(t), Metrics: c.metrics,
	})
}

func (c *cluster) request(t testing.TB, name, cmd string, kwargs, reply any) {
	t.Helper()
	if err := c.panel.Request(workertest.Ctx(t, 20*time.Second), name, cmd, kwargs, reply); err != nil {
		t.Fatalf("%s %s: %v", name, cmd, err)
	}
}

// run configures and starts a worker.
func (c *cluster) run(t testing.TB, name string, cfg map[string]any) {
	t.Helper()
	c.request(t, name, member.CmdConfigure, cfg, nil)
	c.request(t, name, member.CmdStart, nil, nil)
}

func (c *cluster) status(t testing.TB, name string) member.Status {
	t.Helper()
	var s member.Status
	c.request(t, name, member.CmdStatus, nil, &s)
	return s
}

// trainerStats are the trainer figures the tests read.
type trainerStats struct {
	State         string   `msgpack:"state"`
	Version       int64    `msgpack:"version"`
	Updates       int64    `msgpack:"updates"`
	Samples       int64    `msgpack:"samples"`
	Trained       int64    `msgpack:"samples_trained"`
	TrainRate     float64  `msgpack:"train_samples_per_s"`
	BufferSteps   int64    `msgpack:"buffer_steps"`
	Episodes      int64    `msgpack:"episodes"`
	MeanReturn    *float64 `msgpack:"mean_return"`
	DroppedStale  int64    `msgpack:"dropped_stale"`
	DroppedFuture int64    `msgpack:"dropped_future"`
	Rejected      int64    `msgpack:"rejected"`
	Agents        []string `msgpack:"agents"`
	Checkpoints   int64    `msgpack:"checkpoints"`
	CkptVersion   int64    `msgpack:"checkpoint_version"`
	ResumedFrom   int64    `msgpack:"resumed_from"`
	Published     int64    `msgpack:"published"`
	PolicyLoss    *float64 `msgpack:"policy_loss"`
	ValueLoss     *float64 `msgpack:"value_loss"`
	Entropy       *float64 `msgpack:"entropy"`
	ApproxKL      *float64 `msgpack:"approx_kl"`
	ClipFrac      *float64 `msgpack:"clip_frac"`
	GradNorm      *float64 `msgpack:"grad_norm"`
	LagP50        *float64 `msgpack:"policy_lag_p50"`
	LagP99        *float64 `msgpack:"policy_lag_p99"`
	UpdateS       float64  `msgpack:"update_s"`
	LoopS         float64  `msgpack:"loop_s"`
}

// replayClient is a replay client of the test trial, closed when t ends,
// for inserting transitions as actors do.
func (c *cluster) replayClient(t testing.TB) *replaystream.Client {
	t.Helper()
	cl, err := replaystream.NewClient(workertest.Ctx(t, 10*time.Second), replaystream.ClientOptions{Repo: c.repo, Trial: testTrial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func (c *cluster) trainerStats(t testing.TB, name string) trainerStats {
	t.Helper()
	var s trainerStats
	c.request(t, name, member.CmdStats, nil, &s)
	return s
}

// producer sends batches to the trainer's sample stream, as an actor does.
type producer struct {
	p *stream.SampleProducer
}

func newProducer(t testing.TB, repo nameresolve.Repository) *producer {
	t.Helper()
	p, err := stream.NewSampleProducer(workertest.Ctx(t, 10*time.Second), stream.SampleProducerOptions{
		Repo: repo, Trial: testTrial, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &producer{p: p}
}

// post sends b, waiting out back-pressure (no consumer registered yet).
func (p *producer) post(t testing.TB, b *api.SampleBatch) {
	t.Helper()
	eventually.NoError(t, 10*time.Second, "post a batch", func() error {
		err := p.p.Post(b)
		if errors.Is(err, stream.ErrBackpressure) {
			return err
		}
		if err != nil {
			t.Fatalf("post: %v", err)
		}
		return nil
	})
}

// cartPoleBatch is a plausible CartPole batch of n steps collected by
// policy version v: random observations and actions, log-probabilities
// near those of a uniform policy, one episode of return n ending at the
// last step.
func cartPoleBatch(rng *rand.Rand, n int, v int64) *api.SampleBatch {
	b := zeroBatch(n, v, 4)
	b.Episodes = []api.EpisodeStat{{Return: float32(n), Length: int32(n)}}
	for i := range b.Obs.Data {
		b.Obs.Data[i] = float32(0.1 * rng.NormFloat64())
	}
	for i := range n {
		b.Actions.Data[i] = rng.Int32N(2)
		b.Rewards.Data[i] = 1
		b.LogProbs.Data[i] = float32(math.Log(0.5) + 0.05*rng.NormFloat64())
		b.Values.Data[i] = float32(rng.NormFloat64())
	}
	b.Terminated.Data[n-1] = 1
	return b
}

// zeroBatch is a batch of n steps of the default policy's version v, with
// observations of obsShape, all zero.
func zeroBatch(n int, v int64, obsShape ...int) *api.SampleBatch {
	return &api.SampleBatch{
		Policy:        "default",
		PolicyVersion: v,
		Obs:           api.NewFrames(api.NewTensor[float32](append([]int{n}, obsShape...)...)),
		Actions:       api.NewTensor[int32](n),
		Rewards:       api.NewTensor[float32](n),
		Terminated:    api.NewTensor[uint8](n),
		Truncated:     api.NewTensor[uint8](n),
		LogProbs:      api.NewTensor[float32](n),
		Values:        api.NewTensor[float32](n),
		ActorID:       "test/0",
	}
}

// newSubscriber follows the default policy's parameters.
func newSubscriber(t testing.TB, repo nameresolve.Repository) *paramstream.Subscriber {
	t.Helper()
	s, err := paramstream.NewSubscriber(workertest.Ctx(t, 10*time.Second), paramstream.SubscriberOptions{
		Repo: repo, Trial: testTrial, NoCache: true, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fetchVersion fetches until the publisher serves version want or newer.
func fetchVersion(t testing.TB, s *paramstream.Subscriber, want int64) *paramstream.Params {
	t.Helper()
	var got *paramstream.Params
	eventually.NoError(t, 20*time.Second, fmt.Sprintf("fetch version >= %d", want), func() error {
		p, err := s.Fetch(workertest.Ctx(t, 5*time.Second))
		if err != nil {
			return err
		}
		if p.Version < want {
			return fmt.Errorf("version %d", p.Version)
		}
		got = p
		return nil
	})
	return got
}
