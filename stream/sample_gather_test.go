package stream_test

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// postGathered posts b to a gathering producer, flushing and retrying
// while it is refused with back-pressure, for up to 10 s.
func postGathered(t *testing.T, p *stream.SampleProducer, b *api.SampleBatch) {
	t.Helper()
	eventually.NoError(t, 10*time.Second, "post "+b.AgentID, func() error {
		err := p.Post(b)
		if err != nil && !errors.Is(err, stream.ErrBackpressure) {
			t.Fatalf("Post: %v", err)
		}
		if err != nil {
			p.Flush()
		}
		return err
	})
}

// flushed flushes p until it has sent posted batches in all, as an actor
// flushes every poll (the first Flush may find the connection not up yet).
func flushed(t *testing.T, p *stream.SampleProducer, posted int64) {
	t.Helper()
	eventually.True(t, 10*time.Second, "the gathered batches sent", func() bool {
		p.Flush()
		return p.Stats().Posted >= posted
	})
}

// With Gather, Post only gathers; Flush sends what was gathered as one
// message, whose batches a consumer returns in order, n per Poll, keeping
// the rest of the message for the next Poll.
func TestSampleProducerGathers(t *testing.T) {
	repo := workertest.Repo(t)
	c := newConsumer(t, repo, 0, 0)
	p := newProducerWith(t, repo, stream.SampleProducerOptions{Gather: true})
	var sent []*api.SampleBatch
	for i := range 10 {
		b := makeBatch(t, "actor/0", i, 5+i, 3)
		sent = append(sent, b)
		postGathered(t, p, b)
	}
	if st := p.Stats(); st.Messages != 0 || st.Posted != 0 {
		t.Fatalf("stats before Flush %+v: nothing should have been sent", st)
	}
	flushed(t, p, 10)
	st := p.Stats()
	if st.Messages != 1 || st.Posted != 10 {
		t.Fatalf("stats after Flush %+v: want 10 batches in 1 message", st)
	}
	var got []*api.SampleBatch
	eventually.True(t, 10*time.Second, "the message arrives", func() bool {
		bs, err := c.Poll(3)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) > 3 {
			t.Fatalf("Poll(3) returned %d batches", len(bs))
		}
		if len(got) > 0 && len(bs) != min(3, 10-len(got)) {
			t.Fatalf("Poll(3) returned %d batches with %d of the message left", len(bs), 10-len(got))
		}
		got = append(got, bs...)
		return len(got) == 10
	})
	for i := range sent {
		if !reflect.DeepEqual(got[i], sent[i]) {
			t.Fatalf("batch %d changed on the way: got agent %s", i, got[i].AgentID)
		}
	}
}

// A gathering producer sends by itself once gatherFrames (64) batches are
// gathered, so that a message stays a bounded size without a Flush.
func TestSampleProducerGatherBound(t *testing.T) {
	repo := workertest.Repo(t)
	c := newConsumer(t, repo, 0, 0)
	p := newProducerWith(t, repo, stream.SampleProducerOptions{Gather: true})
	for i := range 65 {
		postGathered(t, p, makeBatch(t, "actor/0", i, 2, 2))
	}
	if st := p.Stats(); st.Messages != 1 || st.Posted != 64 {
		t.Fatalf("stats %+v: want the first 64 batches sent as one message", st)
	}
	flushed(t, p, 65)
	got := collect(t, 65, c)[0]
	for i, b := range got {
		if b.AgentID != strconv.Itoa(i) {
			t.Fatalf("batch %d is %s", i, b.AgentID)
		}
	}
}

// Under back-pressure a gathering producer keeps what it gathered and
// refuses further batches (the actor keeps them); once the consumer
// drains, every batch arrives exactly once, in order.
func TestSampleProducerGatherBackpressure(t *testing.T) {
	const hwm = 2
	repo := workertest.Repo(t)
	if err := newProducerWith(t, repo, stream.SampleProducerOptions{Gather: true}).Post(makeBatch(t, "a", 0, 3, 2)); !errors.Is(err, stream.ErrBackpressure) {
		t.Fatalf("Post with no consumer = %v, want ErrBackpressure", err)
	}
	c := newConsumer(t, repo, 0, hwm)
	p := newProducerWith(t, repo, stream.SampleProducerOptions{Gather: true, SendHWM: hwm})
	const steps, dim = 1000, 15 // ~64 KiB a batch: kernel buffers fill
	posted, refused := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for refused == 0 || posted == 0 {
		switch err := p.Post(makeBatch(t, "actor/0", posted, steps, dim)); {
		case err == nil:
			posted++
			p.Flush()
		case errors.Is(err, stream.ErrBackpressure):
			if posted > 0 {
				refused++
			}
			time.Sleep(time.Millisecond)
		default:
			t.Fatal(err)
		}
		if time.Now().After(deadline) || posted > 5000 {
			t.Fatalf("no back-pressure after %d batches", posted)
		}
	}
	if st := p.Stats(); st.Backpressure == 0 || p.Warning() != "" || p.Buffered() == 0 {
		t.Errorf("under back-pressure: stats %+v, warning %q, %d batches buffered", st, p.Warning(), p.Buffered())
	}
	// The actor flushes every poll: what it gathered goes out once there is room.
	var got []*api.SampleBatch
	eventually.True(t, 10*time.Second, "every batch taken arrives", func() bool {
		p.Flush()
		bs, err := c.Poll(8)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, bs...)
		return len(got) >= posted
	})
	if len(got) != posted || p.Buffered() != 0 {
		t.Fatalf("%d batches arrived, %d were taken; %d still buffered", len(got), posted, p.Buffered())
	}
	for i, b := range got {
		if b.AgentID != strconv.Itoa(i) || b.Len() != steps {
			t.Fatalf("batch %d is %q with %d steps", i, b.AgentID, b.Len())
		}
	}
	postGathered(t, p, makeBatch(t, "actor/0", posted, steps, dim))
	flushed(t, p, int64(posted+1))
	if got := collect(t, 1, c)[0]; got[0].AgentID != strconv.Itoa(posted) {
		t.Fatalf("after the drain got %s", got[0].AgentID)
	}
}

// Close sends what was gathered.
func TestSampleProducerCloseSendsGathered(t *testing.T) {
	repo := workertest.Repo(t)
	c := newConsumer(t, repo, 0, 0)
	p := newProducerWith(t, repo, stream.SampleProducerOptions{Gather: true})
	for i := range 3 {
		postGathered(t, p, makeBatch(t, "actor/0", i, 4, 2))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	collect(t, 3, c)
}

// A malformed frame in a message of several is dropped alone: the
// message's other batches arrive.
func TestSampleConsumerDropsMalformedFrame(t *testing.T) {
	repo := workertest.Repo(t)
	c := newConsumer(t, repo, 0, 0)
	push := workertest.RawSocket(t, repo, testTrial.Stream("sample", stream.DefaultStream, 0), zmq.PUSH)
	first, err := msgpack.Marshal(makeBatch(t, "actor/0", 0, 3, 2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := msgpack.Marshal(makeBatch(t, "actor/0", 1, 3, 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := push.SendMessage(first, []byte("garbage"), second); err != nil {
		t.Fatal(err)
	}
	got := collect(t, 2, c)[0]
	if got[0].AgentID != "0" || got[1].AgentID != "1" {
		t.Fatalf("got %s, %s", got[0].AgentID, got[1].AgentID)
	}
	if st := c.Stats(); st.Malformed != 1 || st.Received != 2 {
		t.Fatalf("consumer stats %+v: want 2 received and 1 malformed", st)
	}
}
