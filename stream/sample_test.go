package stream_test

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// makeBatch builds a T-step discrete batch whose content identifies it:
// AgentID is seq, and observations and rewards derive from it. Every 7th
// step ends an episode.
func makeBatch(t testing.TB, actor string, seq, steps, dim int) *api.SampleBatch {
	t.Helper()
	b, err := api.NewSampleBuilder(dim, 0, steps)
	if err != nil {
		t.Fatal(err)
	}
	b.ActorID, b.AgentID, b.Policy = actor, strconv.Itoa(seq), "default"
	obs := make([]float32, dim)
	for s := range steps {
		for j := range obs {
			obs[j] = float32(seq*1000 + s + j)
		}
		if err := b.Append(api.StepRecord{
			Obs: obs, Action: api.Action{Discrete: int32(s % 3)}, Reward: float32(s) / 2,
			Terminated: s%7 == 6, LogProb: -0.5, Value: float32(seq), Version: int64(seq),
		}); err != nil {
			t.Fatal(err)
		}
	}
	batch := b.Build(1.5)
	return &batch
}

func newProducer(t testing.TB, repo nameresolve.Repository, hwm int) *stream.SampleProducer {
	t.Helper()
	return newProducerWith(t, repo, stream.SampleProducerOptions{SendHWM: hwm})
}

// newProducerWith is newProducer with more options; repo, trial and logger
// are filled in.
func newProducerWith(t testing.TB, repo nameresolve.Repository, o stream.SampleProducerOptions) *stream.SampleProducer {
	t.Helper()
	o.Repo, o.Trial, o.Logger = repo, testTrial, testLogger(t)
	p, err := stream.NewSampleProducer(ctxT(t), o)
	if err != nil {
		t.Fatalf("NewSampleProducer: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newConsumer(t testing.TB, repo nameresolve.Repository, index, hwm int) *stream.SampleConsumer {
	t.Helper()
	c, err := stream.NewSampleConsumer(ctxT(t), stream.SampleConsumerOptions{
		Repo: repo, Trial: testTrial, Index: index, RecvHWM: hwm, TTL: time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("NewSampleConsumer: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// postRetrying posts b, retrying on back-pressure for up to 10 s.
func postRetrying(t *testing.T, p *stream.SampleProducer, b *api.SampleBatch) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.Post(b)
		if err == nil {
			return
		}
		if !errors.Is(err, stream.ErrBackpressure) || time.Now().After(deadline) {
			t.Fatalf("Post: %v (warning %q)", err, p.Warning())
		}
		time.Sleep(time.Millisecond)
	}
}

// collect polls the consumers until want batches arrived in all.
func collect(t *testing.T, want int, cs ...*stream.SampleConsumer) [][]*api.SampleBatch {
	t.Helper()
	got := make([][]*api.SampleBatch, len(cs))
	total := 0
	eventually.True(t, 10*time.Second, fmt.Sprintf("%d batches", want), func() bool {
		for i, c := range cs {
			bs, err := c.Poll(8)
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], bs...)
			total += len(bs)
		}
		return total >= want
	})
	if total != want {
		t.Fatalf("received %d batches, want %d", total, want)
	}
	return got
}

func TestSampleStreamToTwoConsumers(t *testing.T) {
	repo := workertest.Repo(t)
	cs := []*stream.SampleConsumer{newConsumer(t, repo, 0, 0), newConsumer(t, repo, 1, 0)}
	p := newProducer(t, repo, 0)
	sent := map[string]*api.SampleBatch{}
	n := 0
	got := make([][]*api.SampleBatch, len(cs))
	// Post until both consumers have been used; the second connection may
	// come up a moment after the first.
	for round := 0; len(got[0]) == 0 || len(got[1]) == 0; round++ {
		if round > 100 {
			t.Fatal("batches never spread over both consumers")
		}
		const per = 10
		for range per {
			b := makeBatch(t, "actor/0", n, 20+n%13, 5)
			sent[b.AgentID] = b
			postRetrying(t, p, b)
			n++
		}
		for i, r := range collect(t, per, cs...) {
			got[i] = append(got[i], r...)
		}
	}
	t.Logf("batches per consumer: %d, %d", len(got[0]), len(got[1]))
	seen := map[string]bool{}
	for _, bs := range got {
		for _, b := range bs {
			want, ok := sent[b.AgentID]
			if !ok || seen[b.AgentID] {
				t.Fatalf("unexpected or duplicate batch %q", b.AgentID)
			}
			seen[b.AgentID] = true
			if !reflect.DeepEqual(b, want) {
				t.Fatalf("batch %s arrived changed:\n got %+v\nwant %+v", b.AgentID, b, want)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("received %d distinct batches, sent %d", len(seen), n)
	}
	var recv int64
	for _, c := range cs {
		st := c.Stats()
		recv += st.Received
		if st.Malformed != 0 || st.Received == 0 || st.Bytes == 0 {
			t.Errorf("consumer stats %+v", st)
		}
	}
	if ps := p.Stats(); ps.Posted != int64(n) || recv != int64(n) {
		t.Errorf("producer stats %+v, consumers received %d, posted %d", ps, recv, n)
	}
	if w := p.Warning(); w != "" {
		t.Errorf("Warning = %q", w)
	}
}

func TestSampleBackpressureWithoutConsumer(t *testing.T) {
	repo := workertest.Repo(t)
	p := newProducer(t, repo, 0)
	b := makeBatch(t, "actor/0", 0, 10, 3)
	if err := p.Post(b); !errors.Is(err, stream.ErrBackpressure) {
		t.Fatalf("Post with no consumer = %v, want ErrBackpressure", err)
	}
	if w := p.Warning(); w != `no sample consumer for stream "default"` {
		t.Errorf("Warning = %q", w)
	}
	// A consumer that registers later is found through the watch.
	c := newConsumer(t, repo, 0, 0)
	postRetrying(t, p, b)
	got := collect(t, 1, c)
	if !reflect.DeepEqual(got[0][0], b) {
		t.Error("batch changed on the way")
	}
	if w := p.Warning(); w != "" {
		t.Errorf("Warning after a send = %q", w)
	}
}

func TestSampleBackpressureSlowConsumer(t *testing.T) {
	const hwm = 2
	repo := workertest.Repo(t)
	c := newConsumer(t, repo, 0, hwm)
	p := newProducer(t, repo, hwm)
	// Batches of ~64 KiB, so kernel socket buffers (a few MiB on loopback)
	// fill after a bounded number of them.
	const steps, dim = 1000, 15
	posted := 0
	var bp error
	deadline := time.Now().Add(10 * time.Second)
	for bp == nil {
		switch err := p.Post(makeBatch(t, "actor/0", posted, steps, dim)); {
		case err == nil:
			posted++
		case errors.Is(err, stream.ErrBackpressure):
			if posted > 0 { // not just waiting for the connection
				bp = err
			}
			time.Sleep(time.Millisecond)
		default:
			t.Fatal(err)
		}
		if time.Now().After(deadline) || posted > 5000 {
			t.Fatalf("no back-pressure after %d batches", posted)
		}
	}
	t.Logf("back-pressure after %d batches", posted)
	if w := p.Warning(); w != "" {
		t.Errorf("warning %q under back-pressure from a consumer; want none: a trainer-bound trial runs so", w)
	}
	if st := p.Stats(); st.Backpressure == 0 {
		t.Errorf("stats %+v", st)
	}
	// Drain: every batch accepted arrives exactly once; then the producer
	// can send again.
	got := collect(t, posted, c)[0]
	for i, b := range got {
		if b.AgentID != strconv.Itoa(i) || b.Len() != steps {
			t.Fatalf("batch %d is %q with %d steps", i, b.AgentID, b.Len())
		}
	}
	postRetrying(t, p, makeBatch(t, "actor/0", posted, steps, dim))
	if got := collect(t, 1, c)[0]; got[0].AgentID != strconv.Itoa(posted) {
		t.Errorf("after draining got %q", got[0].AgentID)
	}
}

func TestSampleConsumerDropsMalformed(t *testing.T) {
	repo := workertest.Repo(t)
	c := newConsumer(t, repo, 0, 0)
	push := rawSocket(t, zmq.PUSH, c.Addr())
	good := makeBatch(t, "actor/9", 1, 8, 2)
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	invalid := *good
	invalid.Rewards = api.NewTensor[float32](3) // T disagrees
	noActions := *good
	noActions.Actions = api.Tensor[int32]{}
	bad := [][]byte{
		{0xc1},
		enc("a string"),
		enc(&invalid),
		enc(&noActions),
		append(enc(good), 0x90),
		enc(map[string]any{"obs": []float64{1, 2}}),
	}
	for _, m := range append(bad, enc(good)) {
		if _, err := push.SendBytes(m, 0); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, 1, c)[0]
	if !reflect.DeepEqual(got[0], good) {
		t.Errorf("good batch changed: %+v", got[0])
	}
	eventually.True(t, 10*time.Second, "malformed counted", func() bool { return c.Stats().Malformed == int64(len(bad)) })
}

// With Reuse, each Poll decodes into the batches the last one returned,
// and every batch still reads as sent: of another actor, another length,
// after a malformed frame decoded half way into the spare batch.
func TestSampleConsumerReuse(t *testing.T) {
	repo := workertest.Repo(t)
	c, err := stream.NewSampleConsumer(ctxT(t), stream.SampleConsumerOptions{
		Repo: repo, Trial: testTrial, TTL: time.Second, Logger: testLogger(t), Reuse: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	push := rawSocket(t, zmq.PUSH, c.Addr())
	sent := []*api.SampleBatch{
		makeBatch(t, "actor/1", 1, 8, 2), makeBatch(t, "actor/1", 2, 8, 2), makeBatch(t, "actor/2", 3, 30, 2),
		makeBatch(t, "actor/1", 4, 3, 2), makeBatch(t, "actor/1", 5, 8, 2),
	}
	noEpisodes := *sent[4]
	noEpisodes.Episodes = nil
	sent = append(sent, &noEpisodes)
	halfGood, err := msgpack.Marshal(map[string]any{"actor_id": "actor/3", "rewards": sent[2].Rewards, "obs": "not frames"})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range sent {
		frame, err := msgpack.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, err := push.SendBytes(halfGood, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := push.SendBytes(frame, 0); err != nil {
			t.Fatal(err)
		}
	}
	var last *api.SampleBatch
	reused := 0
	for i, want := range sent {
		var got []*api.SampleBatch
		eventually.True(t, 10*time.Second, fmt.Sprintf("batch %d", i), func() bool {
			if got, err = c.Poll(1); err != nil {
				t.Fatal(err)
			}
			return len(got) == 1
		})
		if !reflect.DeepEqual(got[0], want) {
			t.Fatalf("batch %d reads %+v, sent %+v", i, got[0], want)
		}
		if got[0] == last {
			reused++
		}
		last = got[0]
	}
	if reused < len(sent)-2 {
		t.Errorf("%d of %d batches were decoded into the last one returned", reused, len(sent))
	}
	if m := c.Stats().Malformed; m != 1 {
		t.Errorf("%d malformed, want 1", m)
	}
}

func TestSampleProducerRejects(t *testing.T) {
	repo := workertest.Repo(t)
	newConsumer(t, repo, 0, 0)
	p, err := stream.NewSampleProducer(ctxT(t), stream.SampleProducerOptions{
		Repo: repo, Trial: testTrial, MaxMsgSize: 1024, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Wait for the connection, so the error below is not back-pressure.
	postRetrying(t, p, makeBatch(t, "a", 0, 2, 2))
	invalid := makeBatch(t, "a", 1, 4, 2)
	invalid.Terminated = api.NewTensor[uint8](2)
	cases := []struct {
		name string
		b    *api.SampleBatch
		want error
	}{
		{"invalid", invalid, nil},
		{"too large", makeBatch(t, "a", 2, 500, 2), stream.ErrTooLarge},
	}
	for _, tc := range cases {
		err := p.Post(tc.b)
		if err == nil || errors.Is(err, stream.ErrBackpressure) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: Post = %v", tc.name, err)
		}
	}
}

func TestNullSampleProducer(t *testing.T) {
	var p stream.SamplePoster = &stream.NullSampleProducer{}
	for i := range 3 {
		if err := p.Post(makeBatch(t, "a", i, 10, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.(*stream.NullSampleProducer); n.Posted != 3 || n.Steps != 30 {
		t.Errorf("counts %+v", n)
	}
}

// Batches handed back with Recycle are decoded into again, their
// observations' storage included, packed MinAtar frames as float ones.
func TestSampleConsumerRecycle(t *testing.T) {
	repo := workertest.Repo(t)
	c, err := stream.NewSampleConsumer(ctxT(t), stream.SampleConsumerOptions{
		Repo: repo, Trial: testTrial, TTL: time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	push := rawSocket(t, zmq.PUSH, c.Addr())
	binary := makeBatch(t, "actor/1", 1, 64, 400)
	for i := range binary.Obs.Data {
		binary.Obs.Data[i] = float32(i % 3 / 2)
	}
	for _, sent := range []*api.SampleBatch{binary, makeBatch(t, "actor/2", 2, 64, 400)} {
		frame, err := msgpack.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		receive := func() *api.SampleBatch {
			if _, err := push.SendBytes(frame, 0); err != nil {
				t.Fatal(err)
			}
			var got []*api.SampleBatch
			eventually.True(t, 10*time.Second, "a batch", func() bool {
				if got, err = c.Poll(1); err != nil {
					t.Fatal(err)
				}
				return len(got) == 1
			})
			if fmt.Sprint(got[0].Obs.Data) != fmt.Sprint(sent.Obs.Data) || got[0].ActorID != sent.ActorID {
				t.Fatalf("received %s's batch wrong", sent.ActorID)
			}
			return got[0]
		}
		first := receive()
		obs := unsafe.SliceData(first.Obs.Data)
		c.Recycle(first)
		second := receive()
		if second != first || unsafe.SliceData(second.Obs.Data) != obs {
			t.Errorf("%s: the recycled batch or its observations' storage was not reused", sent.ActorID)
		}
		third := receive() // nothing recycled: a new batch
		if third == second {
			t.Errorf("%s: a batch still held was decoded into", sent.ActorID)
		}
	}
}
