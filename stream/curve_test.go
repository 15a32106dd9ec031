package stream_test

import (
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/curvetest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// With the trial's keys, an inference server refuses the handshake of a
// peer without them (no CURVE, or another key pair): their requests never
// reach it and they get no reply, while a client with the keys is served.
func TestInferenceServerCurve(t *testing.T) {
	keys := curvetest.Keys(t)
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, func(o *stream.InferenceServerOptions) { o.Curve = keys })
	mon := curvetest.Watch(t, srv.Socket())
	req := rawRequest(t, map[string]any{
		"ids": api.Tensor[int64]{Shape: []int{1}, Data: []int64{7}},
		"obs": api.Tensor[float32]{Shape: []int{1, obsDim}, Data: obsFor(7)},
	})
	outsiders := map[string]*zmq.Socket{
		"a client without CURVE":     curvetest.Raw(t, zmq.DEALER, srv.Addr(), nil),
		"a client with another pair": curvetest.Raw(t, zmq.DEALER, srv.Addr(), curvetest.Keys(t)),
	}
	for _, s := range outsiders {
		if _, err := s.SendBytes(req, zmq.DONTWAIT); err != nil {
			t.Fatal(err)
		}
	}
	mon.WaitRefused(t, len(outsiders))

	c, err := stream.NewRemoteInferenceClient(ctxT(t), stream.RemoteInferenceOptions{
		Repo: repo, Trial: testTrial, ObsDim: obsDim, Logger: testLogger(t), Curve: keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	drive(t, []stream.InferenceClient{c}, []*server{srv}, post(t, c, 1, 2))
	if st := srv.Stats(); st.Rows != 2 || st.Malformed != 0 {
		t.Errorf("server stats %+v: want the keyed client's 2 rows only", st)
	}
	for who, s := range outsiders {
		curvetest.NothingReceived(t, s, who)
	}
}

// With the trial's keys, a sample consumer takes batches from producers
// with the keys only.
func TestSampleConsumerCurve(t *testing.T) {
	keys := curvetest.Keys(t)
	repo := workertest.Repo(t)
	c, err := stream.NewSampleConsumer(ctxT(t), stream.SampleConsumerOptions{
		Repo: repo, Trial: testTrial, Logger: testLogger(t), Curve: keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mon := curvetest.Watch(t, c.Socket())
	forged, err := msgpack.Marshal(makeBatch(t, "intruder", 1, 4, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*zmq.Socket{
		curvetest.Raw(t, zmq.PUSH, c.Addr(), nil),
		curvetest.Raw(t, zmq.PUSH, c.Addr(), curvetest.Keys(t)),
	} {
		if _, err := s.SendBytes(forged, zmq.DONTWAIT); err != nil {
			t.Fatal(err)
		}
	}
	mon.WaitRefused(t, 2)

	p, err := stream.NewSampleProducer(ctxT(t), stream.SampleProducerOptions{
		Repo: repo, Trial: testTrial, Logger: testLogger(t), Curve: keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	postRetrying(t, p, makeBatch(t, "actor/0", 1, 4, 2))
	got := collect(t, 1, c)[0]
	if got[0].ActorID != "actor/0" || c.Stats().Malformed != 0 {
		t.Errorf("consumer got %q (malformed %d): want the keyed producer's batch only", got[0].ActorID, c.Stats().Malformed)
	}
}
