package localreplay_test

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/panel"
)

var trial = names.NewTrial("postertest", "t1")

// batch is a 10-step CartPole-shaped batch that terminates.
func batch() *api.SampleBatch {
	b := &api.SampleBatch{
		Obs:        api.NewFrames(api.Tensor[float32]{Shape: []int{10, 4}, Data: make([]float32, 40)}),
		Actions:    api.Tensor[int32]{Shape: []int{10}, Data: make([]int32, 10)},
		Rewards:    api.Tensor[float32]{Shape: []int{10}, Data: make([]float32, 10)},
		Terminated: api.Tensor[uint8]{Shape: []int{10}, Data: make([]uint8, 10)},
		Truncated:  api.Tensor[uint8]{Shape: []int{10}, Data: make([]uint8, 10)},
		Values:     api.Tensor[float32]{Shape: []int{10}, Data: make([]float32, 10)},
	}
	for i := range 10 {
		b.Rewards.Data[i] = 1
	}
	b.Terminated.Data[9] = 1
	return b
}

// startReplay runs replay worker 0 of the trial, configured with cfg (nil:
// the defaults) and started, and returns a panel and its name.
func startReplay(t *testing.T, repo nameresolve.Repository, cfg map[string]any) (*panel.ControlPanel, string) {
	t.Helper()
	workertest.Start(t, worker.Options{Trial: trial, Registry: workertest.Registry(map[string]worker.Factory{replayworker.TypeName: replayworker.New}),
		Type: replayworker.TypeName, Host: "127.0.0.1", Repo: repo, Logger: workertest.Logger(t, slog.LevelWarn)})
	p := workertest.Panel(t, repo, trial)
	name := names.WorkerName(replayworker.TypeName, 0)
	if err := p.Request(workertest.Ctx(t, 10*time.Second), name, "configure", cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Request(workertest.Ctx(t, 10*time.Second), name, "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	return p, name
}

// With no replay server the poster keeps stepping: its outbox stays
// bounded, the oldest transitions dropped and counted. When a replay
// worker registers, the transitions go in.
func TestPosterDropsOldestWithoutReplayThenSends(t *testing.T) {
	repo := workertest.Repo(t)
	p, err := localreplay.NewPoster(workertest.Ctx(t, 10*time.Second), localreplay.PosterOptions{
		Repo: repo, Trial: trial, Gamma: 0.9, NStep: 3, MaxOutbox: 25})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for range 5 {
		if err := p.Post(batch()); err != nil {
			t.Fatalf("post without a replay: %v", err)
		}
	}
	if st := p.Stats(); st.Outbox != 25 || st.Dropped != 25 || st.Batches != 5 || p.Warning() == "" {
		t.Fatalf("stats %+v, warning %q", st, p.Warning())
	}
	bad := batch()
	bad.Values = api.Tensor[float32]{}
	if err := p.Post(bad); err == nil || errors.Is(err, stream.ErrBackpressure) {
		t.Fatalf("a batch without values: %v", err)
	}

	panel, name := startReplay(t, repo, nil)
	eventually.NoError(t, 10*time.Second, "outbox drained into the replay", func() error {
		p.Flush()
		if st := p.Stats(); st.Inserted != 25 || st.Outbox != 0 {
			return errors.New("not yet")
		}
		return nil
	})
	var rs struct {
		Size int `msgpack:"size"`
	}
	if err := panel.Request(workertest.Ctx(t, 10*time.Second), name, "stats", nil, &rs); err != nil || rs.Size != 25 {
		t.Fatalf("replay size %d (%v), want 25", rs.Size, err)
	}
}

// With a replay there whose rate limiter holds inserts back, the poster
// refuses batches (back-pressure, the actor keeps them) rather than drop
// transitions: once a learner samples, every transition of every batch it
// took is in the replay.
func TestPosterBackpressureLosesNothing(t *testing.T) {
	repo := workertest.Repo(t)
	ctx := workertest.Ctx(t, 30*time.Second)
	// After 10 items, an insert waits for a sample (1 per insert, 5 of slack).
	startReplay(t, repo, map[string]any{"tables": []map[string]any{{"name": "default", "max_size": 10_000,
		"limiter": map[string]any{"min_size": 10, "samples_per_insert": 1, "error_buffer": 5}}}})
	p, err := localreplay.NewPoster(ctx, localreplay.PosterOptions{Repo: repo, Trial: trial, Gamma: 0.9, NStep: 3,
		MaxOutbox: 25, Chunk: 5, MaxInFlight: 1, TimeoutMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	eventually.True(t, 10*time.Second, "replay shard known", func() bool { p.Flush(); return p.Warning() == "" })

	accepted, refused := 0, 0
	for range 40 {
		switch err := p.Post(batch()); {
		case errors.Is(err, stream.ErrBackpressure):
			refused++
		case err != nil:
			t.Fatal(err)
		default:
			accepted++
		}
		p.Flush()
	}
	st := p.Stats()
	if refused == 0 || st.Dropped != 0 || st.Outbox > 25 {
		t.Fatalf("%d batches taken, %d refused; stats %+v: want refusals, no drops, the outbox within 25", accepted, refused, st)
	}

	c, err := replaystream.NewClient(ctx, replaystream.ClientOptions{Repo: repo, Trial: trial, Slack: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := int64(10 * accepted) // a terminated 10-step batch is 10 transitions
	eventually.NoError(t, 20*time.Second, "every transition taken is inserted", func() error {
		// A learner's samples let the held inserts through.
		if _, err := c.Poll(); err != nil {
			return err
		}
		// One item a request: the limiter lets a sample through only
		// within its error buffer.
		for c.Pending() < 4 && len(c.Shards()) == 1 {
			if _, err := c.Send(0, &replaystream.Request{Op: replaystream.OpSample, Table: "default", N: 1, TimeoutMs: 100}); err != nil {
				return err
			}
		}
		p.Flush()
		if st := p.Stats(); st.Inserted != want || st.Dropped != 0 || st.Failed != 0 {
			return fmt.Errorf("stats %+v, want %d inserted", st, want)
		}
		return nil
	})
}
