package replayworker_test

import (
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/replaystream"
	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkReplayThroughput: CartPole transitions (msgpack, about 100
// bytes each) from an inserting client through a replay worker (real zmq
// on loopback, in-process worker) to a sampling client, as actors and a
// trainer use it: inserts of 256, samples of 64, four of each in flight.
// Reported: transitions/s into the table and out of it, and the insert
// stream's MB/s (held against stream.BenchmarkRawPushPull64KiB in benchtab).
func BenchmarkReplayThroughput(b *testing.B) {
	repo := workertest.Repo(b)
	panel := workertest.Panel(b, repo, testTrial)
	startReplay(b, repo, panel, 0, "")
	ins, err := replaystream.NewClient(workertest.Ctx(b, time.Minute), replaystream.ClientOptions{Repo: repo, Trial: testTrial})
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	smp, err := replaystream.NewClient(workertest.Ctx(b, time.Minute), replaystream.ClientOptions{Repo: repo, Trial: testTrial})
	if err != nil {
		b.Fatal(err)
	}
	defer smp.Close()
	obs := api.Tensor[float32]{Shape: []int{4}, Data: []float32{0.1, -0.2, 0.03, 0.4}}
	item, _ := msgpack.Marshal(&localreplay.Transition{Obs: api.NewFrames(obs), NextObs: api.NewFrames(obs), Action: 1, Reward: 1, Discount: 0.97})
	req := &replaystream.Request{Op: replaystream.OpInsert, Table: "t", TimeoutMs: 10000,
		Items: make([][]byte, 256), Priorities: api.Tensor[float64]{Shape: []int{256}, Data: make([]float64, 256)}}
	for i := range req.Items {
		req.Items[i], req.Priorities.Data[i] = item, 1
	}
	sreq := &replaystream.Request{Op: replaystream.OpSample, Table: "t", N: 64, TimeoutMs: 10000}
	eventually.True(b, 10*time.Second, "shard known", func() bool { return len(ins.Shards()) == 1 && len(smp.Shards()) == 1 })
	var inserted, sampled int64
	b.ResetTimer()
	start := time.Now()
	for inserted < int64(b.N) {
		for ins.Pending() < 4 {
			if _, err := ins.Send(0, req); err != nil {
				break
			}
		}
		for smp.Pending() < 4 {
			if _, err := smp.Send(0, sreq); err != nil {
				break
			}
		}
		reps, _ := ins.Poll()
		for _, r := range reps {
			if r.Error == nil {
				inserted += int64(r.IDs.Len())
			}
		}
		reps, _ = smp.Poll()
		for _, r := range reps {
			sampled += int64(len(r.Items))
		}
		time.Sleep(50 * time.Microsecond)
	}
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(inserted)/el, "inserts/s")
	b.ReportMetric(float64(sampled)/el, "samples/s")
	b.ReportMetric(float64(inserted)*float64(len(item))/el/1e6, "MB/s")
}
