package replayworker_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/replay"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/replayworker"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/panel"
	zmq "github.com/pebbe/zmq4"
)

var (
	testTypes = workertest.Registry(map[string]worker.Factory{replayworker.TypeName: replayworker.New})
	testTrial = names.NewTrial("replaytest", "t1")
)

func ctxT(t testing.TB) context.Context { return workertest.Ctx(t, 20*time.Second) }

// startReplay runs replay worker index, configured with one table "t"
// (prioritized, alpha 1, beta 0.5, min size 4) and started. The idle wait
// is far longer than the test: requests must wake it.
func startReplay(t testing.TB, repo nameresolve.Repository, panel *panel.ControlPanel, index int, ckptDir string) *workertest.Running {
	t.Helper()
	cfg := map[string]any{
		"tables":         []map[string]any{{"name": "t", "max_size": 1000, "alpha": 1.0, "beta": 0.5, "limiter": map[string]any{"min_size": 4}}},
		"checkpoint_dir": ckptDir,
	}
	return startReplayWith(t, repo, panel, index, cfg, nil)
}

// startReplayWith runs replay worker index, recording into reg (nil: a
// registry of its own), configured with cfg and started.
func startReplayWith(t testing.TB, repo nameresolve.Repository, panel *panel.ControlPanel, index int, cfg map[string]any, reg *telemetry.Registry) *workertest.Running {
	t.Helper()
	r := workertest.Start(t, worker.Options{Trial: testTrial, Registry: testTypes, Type: replayworker.TypeName,
		Index: index, Host: "127.0.0.1", Repo: repo, IdleWait: time.Minute, Logger: workertest.Logger(t, slog.LevelInfo), Metrics: reg})
	name := names.WorkerName(replayworker.TypeName, index)
	if err := panel.Request(ctxT(t), name, "configure", cfg, nil); err != nil {
		t.Fatal(err)
	}
	if err := panel.Request(ctxT(t), name, "start", nil, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

func client(t *testing.T, repo nameresolve.Repository) *replaystream.Client {
	c, err := replaystream.NewClient(ctxT(t), replaystream.ClientOptions{Repo: repo, Trial: testTrial, Slack: 10 * time.Second}) // the server answers first, even on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// send sends req to shard, trying again while the connection is not up.
func send(t *testing.T, c *replaystream.Client, shard int, req *replaystream.Request) int64 {
	t.Helper()
	var rid int64
	eventually.NoError(t, 5*time.Second, "send", func() error {
		var err error
		rid, err = c.Send(shard, req)
		return err
	})
	return rid
}

// do sends req to shard and waits for its reply.
func do(t *testing.T, c *replaystream.Client, shard int, req *replaystream.Request) *replaystream.Reply {
	t.Helper()
	rid := send(t, c, shard, req)
	var got *replaystream.Reply
	eventually.NoError(t, 10*time.Second, "reply", func() error {
		reps, err := c.Poll()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reps {
			if r.RID == rid {
				got = r
				return nil
			}
		}
		return fmt.Errorf("no reply to %d yet", rid)
	})
	return got
}

func f64(v ...float64) api.Tensor[float64] { return api.Tensor[float64]{Shape: []int{len(v)}, Data: v} }
func i64(v ...int64) api.Tensor[int64]     { return api.Tensor[int64]{Shape: []int{len(v)}, Data: v} }

type stats struct {
	Size             int     `msgpack:"size"`
	Inserts          int64   `msgpack:"inserts"`
	Samples          int64   `msgpack:"samples"`
	PriorityUpdates  int64   `msgpack:"priority_updates"`
	UnknownUpdates   int64   `msgpack:"unknown_updates"`
	RefusedUpdates   int64   `msgpack:"refused_updates"`
	LimiterWaits     int64   `msgpack:"limiter_waits"`
	LimiterTimeouts  int64   `msgpack:"limiter_timeouts"`
	Malformed        int64   `msgpack:"malformed"`
	UnknownTable     int64   `msgpack:"unknown_table"`
	Parked           int     `msgpack:"parked"`
	SamplesPerInsert float64 `msgpack:"samples_per_insert"`
}

func getStats(t *testing.T, panel *panel.ControlPanel, index int) stats {
	t.Helper()
	var s stats
	if err := panel.Request(ctxT(t), names.WorkerName(replayworker.TypeName, index), "stats", nil, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Two shards: a sample before min size is held without blocking the loop
// and fails at its deadline; inserts spread over both shards; samples,
// priority updates routed by id, bad priorities refused, malformed frames
// counted; stats say so.
func TestReplayWorkerServesShards(t *testing.T) {
	repo := workertest.Repo(t)
	panel := workertest.Panel(t, repo, testTrial)
	startReplay(t, repo, panel, 0, "")
	startReplay(t, repo, panel, 1, "")
	c := client(t, repo)
	eventually.True(t, 5*time.Second, "both shards known", func() bool { return slices.Equal(c.Shards(), []int{0, 1}) })
	if n := c.Connections(); n != 2 {
		t.Fatalf("connections to %d shards, want 2", n)
	}

	// A sample before min size waits; meanwhile the worker answers
	// requests; at its deadline it fails naming the starved side.
	rid := send(t, c, 0, &replaystream.Request{Op: replaystream.OpSample, Table: "t", N: 2, TimeoutMs: 1500})
	eventually.True(t, 5*time.Second, "the worker answers while the sample is parked", func() bool {
		s := getStats(t, panel, 0)
		return s.Parked == 1 && s.LimiterWaits == 1
	})
	var rep *replaystream.Reply
	eventually.True(t, 5*time.Second, "sample times out", func() bool {
		reps, _ := c.Poll()
		for _, r := range reps {
			if r.RID == rid {
				rep = r
			}
		}
		return rep != nil
	})
	if rep.Error == nil || rep.Error.Type != replaystream.ErrTypeRateLimited {
		t.Fatalf("early sample: %+v", rep)
	}
	t.Logf("early sample: %v", rep.Error)

	// Inserts round-robin (shard -1): each shard gets two requests of 3.
	var ids []int64
	for i := range 4 {
		r := do(t, c, -1, &replaystream.Request{Op: replaystream.OpInsert, Table: "t",
			Items: [][]byte{{byte(i), 0}, {byte(i), 1}, {byte(i), 2}}, Priorities: f64(1, 2, 3)})
		if r.Error != nil || r.IDs.Len() != 3 {
			t.Fatalf("insert: %+v", r)
		}
		for _, id := range r.IDs.Data {
			if replaystream.ShardOf(id) != r.Shard {
				t.Fatalf("id %x from shard %d says shard %d", id, r.Shard, replaystream.ShardOf(id))
			}
		}
		ids = append(ids, r.IDs.Data...)
	}
	for shard := range 2 {
		r := do(t, c, shard, &replaystream.Request{Op: replaystream.OpSample, Table: "t", N: 16, TimeoutMs: 1000})
		if r.Error != nil || len(r.Items) != 16 || r.Size != 6 {
			t.Fatalf("sample of shard %d: %+v", shard, r)
		}
		for i := range r.Items {
			// Priority p of 6 items with priorities 1,2,3,1,2,3: P = p/12,
			// weight (P_min/P)^0.5.
			p := r.Priorities.Data[i]
			if math.Abs(r.Probabilities.Data[i]-p/12) > 1e-12 || math.Abs(r.Weights.Data[i]-math.Sqrt(1/p)) > 1e-12 ||
				replaystream.ShardOf(r.IDs.Data[i]) != shard || float64(r.Items[i][1]+1) != p {
				t.Fatalf("item %d of shard %d: id %x priority %v probability %v weight %v data %v", i, shard,
					r.IDs.Data[i], p, r.Probabilities.Data[i], r.Weights.Data[i], r.Items[i])
			}
		}
	}
	// Updates by shard of id: one unknown id.
	for shard := range 2 {
		var mine []int64
		for _, id := range ids {
			if replaystream.ShardOf(id) == shard {
				mine = append(mine, id)
			}
		}
		mine = append(mine, mine[0]+1000)
		pr := make([]float64, len(mine))
		r := do(t, c, shard, &replaystream.Request{Op: replaystream.OpUpdate, Table: "t", IDs: i64(mine...), Priorities: f64(pr...)})
		if r.Error != nil || r.Updated != 6 || r.Unknown != 1 {
			t.Fatalf("update on shard %d: %+v", shard, r)
		}
		pr[0] = math.NaN()
		r = do(t, c, shard, &replaystream.Request{Op: replaystream.OpUpdate, Table: "t", IDs: i64(mine...), Priorities: f64(pr...)})
		if r.Error == nil || r.Error.Type != replaystream.ErrTypeBadPriority {
			t.Fatalf("NaN update: %+v", r)
		}
	}
	if r := do(t, c, 0, &replaystream.Request{Op: replaystream.OpSample, Table: "nope", N: 1}); r.Error == nil || r.Error.Type != replaystream.ErrTypeNoTable {
		t.Fatalf("unknown table: %+v", r)
	}
	if r := do(t, c, 0, &replaystream.Request{Op: replaystream.OpInsert, Table: "t", Items: [][]byte{{1}}, Priorities: f64(1, 2)}); r.Error == nil || r.Error.Type != replaystream.ErrTypeBadRequest {
		t.Fatalf("mismatched insert: %+v", r)
	}

	// Garbage straight to shard 0's socket (the mismatched insert above was the first malformed request).
	raw := workertest.RawSocket(t, repo, testTrial.Stream(replaystream.Kind, replaystream.DefaultName, 0), zmq.DEALER)
	for _, g := range [][]byte{[]byte("garbage"), {0xdf, 0xff, 0xff, 0xff, 0xff}, {0x81, 0xa2, 'o', 'p', 0xa1, 'x'}} {
		eventually.NoError(t, 5*time.Second, "send garbage", func() error {
			_, err := raw.SendBytes(g, zmq.DONTWAIT)
			return err
		})
	}
	eventually.NoError(t, 5*time.Second, "malformed counted", func() error {
		if s := getStats(t, panel, 0); s.Malformed != 4 {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})
	s := getStats(t, panel, 0)
	if s.Size != 6 || s.Inserts != 6 || s.Samples != 16 || s.PriorityUpdates != 6 || s.UnknownUpdates != 1 ||
		s.RefusedUpdates != 7 || s.LimiterWaits != 1 || s.LimiterTimeouts != 1 || s.UnknownTable != 1 {
		t.Fatalf("stats of shard 0: %+v", s)
	}
}

// A replay worker restarted with its checkpoint directory resumes its
// table, twice: what was inserted after the first restart survives the
// second (checkpoints of a restarted worker stay the newest).
func TestReplayWorkerResumesFromCheckpoint(t *testing.T) {
	repo := workertest.Repo(t)
	dir := t.TempDir()
	c := client(t, repo)
	var ids []int64
	for round := range 3 {
		// A new panel each time: an old one's connection points at the
		// old address.
		panel := workertest.Panel(t, repo, testTrial)
		r := startReplay(t, repo, panel, 0, dir)
		eventually.True(t, 5*time.Second, "shard known", func() bool {
			c.Poll()
			return len(c.Shards()) == 1
		})
		// What was inserted before is all there.
		if len(ids) > 0 {
			var got *replaystream.Reply
			eventually.NoError(t, 10*time.Second, "sample from the restarted worker", func() error {
				got = do(t, c, 0, &replaystream.Request{Op: replaystream.OpSample, Table: "t", N: 50, TimeoutMs: 200})
				if got.Error != nil {
					return got.Error
				}
				return nil
			})
			if got.Size != len(ids) {
				t.Fatalf("round %d: the resumed table holds %d items, %d were inserted", round, got.Size, len(ids))
			}
			for i, id := range got.IDs.Data {
				if !slices.Contains(ids, id) {
					t.Fatalf("round %d: item %d: id %x not one inserted before (%x)", round, i, id, ids)
				}
			}
		}
		ins := do(t, c, 0, &replaystream.Request{Op: replaystream.OpInsert, Table: "t", Items: [][]byte{{1}, {2}, {3}, {4}, {5}}, Priorities: f64(1, 1, 1, 1, 1)})
		if ins.Error != nil {
			t.Fatal(ins.Error)
		}
		ids = append(ids, ins.IDs.Data...)
		for range 4 - round { // fewer checkpoints than the worker before wrote
			if err := panel.Request(ctxT(t), r.Name(), "checkpoint", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		r.Cancel()
		<-r.Done()
	}
}

// An actor's cache (phase one of two-phase sampling) goes in at priority
// sum/len(items) and replaces that actor's previous cache; another actor's
// cache stays.
func TestReplayWorkerCaches(t *testing.T) {
	repo := workertest.Repo(t)
	panel := workertest.Panel(t, repo, testTrial)
	startReplay(t, repo, panel, 0, "")
	c := client(t, repo)
	eventually.True(t, 5*time.Second, "shard known", func() bool { return len(c.Shards()) == 1 })
	cache := func(actor string, sum float64, n int) *replaystream.Reply {
		items := make([][]byte, n)
		for i := range items {
			items[i] = []byte(actor)
		}
		return do(t, c, 0, &replaystream.Request{Op: replaystream.OpCache, Table: "t", Actor: actor, Sum: sum, Items: items})
	}
	if r := cache("a", 8, 4); r.Error != nil || r.IDs.Len() != 4 || r.Size != 4 {
		t.Fatalf("first cache of a: %+v", r)
	}
	if r := cache("b", 6, 2); r.Error != nil || r.Size != 6 {
		t.Fatalf("cache of b: %+v", r)
	}
	if r := cache("a", 30, 3); r.Error != nil || r.Size != 5 {
		t.Fatalf("second cache of a replaces the first: %+v", r)
	}
	// Items of a at priority 30/3 = 10, of b at 6/2 = 3: total 36.
	r := do(t, c, 0, &replaystream.Request{Op: replaystream.OpSample, Table: "t", N: 50, TimeoutMs: 1000})
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	for i, it := range r.Items {
		want := map[string]float64{"a": 10, "b": 3}[string(it)]
		if r.Priorities.Data[i] != want || math.Abs(r.Probabilities.Data[i]-want/36) > 1e-12 {
			t.Fatalf("item of %s: priority %v probability %v, want %v and %v", it, r.Priorities.Data[i], r.Probabilities.Data[i], want, want/36)
		}
	}
	if r := do(t, c, 0, &replaystream.Request{Op: replaystream.OpCache, Table: "t", Actor: "", Sum: 1, Items: [][]byte{{1}}}); r.Error == nil {
		t.Fatalf("a cache without an actor: %+v", r)
	}
}

// Periodic checkpoints are written in the background while the worker
// goes on inserting and sampling (the race detector watches the snapshot
// being encoded as the table changes), and the last one, written at exit
// after any in flight, holds every item.
func TestReplayWorkerCheckpointsInBackground(t *testing.T) {
	repo := workertest.Repo(t)
	dir := t.TempDir()
	cfg := map[string]any{
		"tables":             []map[string]any{{"name": "t", "max_size": 100_000, "limiter": map[string]any{"min_size": 1}}},
		"checkpoint_dir":     dir,
		"checkpoint_every_s": 1,
	}
	panel := workertest.Panel(t, repo, testTrial)
	r := startReplayWith(t, repo, panel, 0, cfg, nil)
	c := client(t, repo)
	eventually.True(t, 5*time.Second, "shard known", func() bool {
		c.Poll()
		return len(c.Shards()) == 1
	})
	item := make([]byte, 4096)
	inserted := 0
	files := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "replay-t-*.ckpt"))
		return m
	}
	for deadline := time.Now().Add(20 * time.Second); len(files()) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no periodic checkpoints after 20 s: %v", files())
		}
		ins := do(t, c, 0, &replaystream.Request{Op: replaystream.OpInsert, Table: "t", Items: [][]byte{item, item, item, item}, Priorities: f64(1, 1, 1, 1)})
		if ins.Error != nil {
			t.Fatal(ins.Error)
		}
		inserted += 4
		if s := do(t, c, 0, &replaystream.Request{Op: replaystream.OpSample, Table: "t", N: 8, TimeoutMs: 200}); s.Error != nil {
			t.Fatal(s.Error)
		}
	}
	r.Cancel()
	<-r.Done()
	tb, _, err := replay.LoadNewestCheckpoint(dir, "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Counters().Size; got != inserted {
		t.Fatalf("the last checkpoint holds %d items, %d were inserted", got, inserted)
	}
}
