package sinkworker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/sinkworker"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	zmq "github.com/pebbe/zmq4"
)

// testTypes are the worker types these tests run.
var testTypes = workertest.Registry(map[string]worker.Factory{sinkworker.TypeName: sinkworker.New})

var testTrial = names.NewTrial("sinktest", "t1")

func testLogger(t *testing.T) *slog.Logger { return workertest.Logger(t, slog.LevelDebug) }

func ctxT(t *testing.T) context.Context { return workertest.Ctx(t, 10*time.Second) }

// startSink runs a sink worker in-process and returns the registry it
// records into. Its idle wait is far longer than the test, so batches are
// only seen in time if arrivals wake it.
func startSink(t *testing.T, repo nameresolve.Repository, index int) *telemetry.Registry {
	t.Helper()
	reg := telemetry.NewRegistry()
	workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: sinkworker.TypeName, Index: index, Host: "127.0.0.1", Repo: repo,
		IdleWait: time.Minute, Logger: testLogger(t), Metrics: reg,
	})
	return reg
}

// batch is a 10-step batch of actor with an episode ending at steps 4 and 9.
func batch(t *testing.T, actor string) *api.SampleBatch { return batchOf(t, actor, 10, 5) }

// batchOf is a batch of actor of steps steps, of reward 1 each, with an
// episode ending every `every` steps (0: none).
func batchOf(t *testing.T, actor string, steps, every int) *api.SampleBatch {
	t.Helper()
	b, err := api.NewSampleBuilder(2, 0, steps)
	if err != nil {
		t.Fatal(err)
	}
	b.ActorID = actor
	for s := range steps {
		if err := b.Append(api.StepRecord{Obs: []float32{1, 2}, Reward: 1, Terminated: every > 0 && s%every == every-1}); err != nil {
			t.Fatal(err)
		}
	}
	out := b.Build(0)
	return &out
}

// post posts b, waiting out back-pressure.
func post(t *testing.T, p *stream.SampleProducer, b *api.SampleBatch) {
	t.Helper()
	for {
		err := p.Post(b)
		if err == nil {
			return
		}
		if !errors.Is(err, stream.ErrBackpressure) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}

type summary struct {
	Batches    int64            `msgpack:"batches"`
	Steps      int64            `msgpack:"steps"`
	Episodes   int64            `msgpack:"episodes"`
	ReturnsSum float64          `msgpack:"returns_sum"`
	MeanReturn float64          `msgpack:"mean_episode_return"`
	ByActor    map[string]int64 `msgpack:"by_actor"`
	Malformed  int64            `msgpack:"malformed"`
	Bytes      int64            `msgpack:"bytes"`
}

func TestSinkCountsWhatArrives(t *testing.T) {
	repo := workertest.Repo(t)
	startSink(t, repo, 0)
	panel := workertest.Panel(t, repo, testTrial)
	name := names.WorkerName(sinkworker.TypeName, 0)
	for _, cmd := range []string{"configure", "start"} {
		var kwargs any
		if cmd == "configure" {
			kwargs = map[string]any{"stream": "default"}
		}
		if err := panel.Request(ctxT(t), name, cmd, kwargs, nil); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}

	p, err := stream.NewSampleProducer(ctxT(t), stream.SampleProducerOptions{Repo: repo, Trial: testTrial, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := map[string]int64{"actor/0": 7, "actor/1": 5}
	for actor, n := range want {
		b := batch(t, actor)
		for range n {
			post(t, p, b)
		}
	}
	// One malformed message, straight to the sink's registered address.
	push := workertest.RawSocket(t, repo, testTrial.Stream("sample", "default", 0), zmq.PUSH)
	if _, err := push.SendBytes([]byte("garbage"), 0); err != nil {
		t.Fatal(err)
	}

	var s summary
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := panel.Request(ctxT(t), name, "summary", nil, &s); err != nil {
			t.Fatal(err)
		}
		if s.Batches == 12 && s.Malformed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("summary %+v; want 12 batches and 1 malformed (an idle sink must wake on arrival)", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s.Steps != 120 || s.Episodes != 24 || s.ReturnsSum != 120 || s.MeanReturn != 5 || s.Bytes == 0 ||
		fmt.Sprint(s.ByActor) != fmt.Sprint(want) {
		t.Errorf("summary %+v", s)
	}
	var stats struct {
		summary `msgpack:",inline"`
		Samples int64 `msgpack:"samples"`
	}
	if err := panel.Request(ctxT(t), name, "stats", nil, &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Samples != 120 || stats.Batches != 12 {
		t.Errorf("stats: samples %d batches %d, want 120 and 12", stats.Samples, stats.Batches)
	}
}

func TestSinkConfigErrors(t *testing.T) {
	repo := workertest.Repo(t)
	startSink(t, repo, 1)
	panel := workertest.Panel(t, repo, testTrial)
	name := names.WorkerName(sinkworker.TypeName, 1)
	cases := []struct {
		name   string
		kwargs map[string]any
		ok     bool
	}{
		{"wrong type", map[string]any{"stream": 3}, false},
		{"negative index", map[string]any{"index": -1}, false},
		{"explicit index", map[string]any{"stream": "s2", "index": 4}, true},
		{"reconfigure", map[string]any{"stream": "s2", "index": 4}, true},
	}
	for _, tc := range cases {
		err := panel.Request(ctxT(t), name, "configure", tc.kwargs, nil)
		if (err == nil) != tc.ok {
			t.Fatalf("%s: configure err = %v", tc.name, err)
		}
	}
	if _, err := repo.Get(ctxT(t), testTrial.Stream("sample", "s2", 4)); err != nil {
		t.Errorf("consumer record: %v", err)
	}
}
