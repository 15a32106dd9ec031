package stream_test

import (
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// sendAll sends each frame on s, then good.
func sendAll(t *testing.T, s *zmq.Socket, frames []mptest.Frame, good []byte) {
	t.Helper()
	for _, f := range frames {
		if _, err := s.SendBytes(f.Bytes, 0); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
	}
	if _, err := s.SendBytes(good, 0); err != nil {
		t.Fatal(err)
	}
}

// TestSampleConsumerSurvivesHostileLengths: frames of a few bytes whose
// headers claim gigabytes, under every key of a sample batch, are dropped
// as malformed without allocating what they claim (a 17-byte frame used to
// end the process in an out-of-memory crash), and a good batch after them
// arrives.
func TestSampleConsumerSurvivesHostileLengths(t *testing.T) {
	c := newConsumer(t, workertest.Repo(t), 0, 0)
	push := rawSocket(t, zmq.PUSH, c.Addr())
	good := makeBatch(t, "actor/1", 1, 4, 2)
	enc, err := msgpack.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	frames := mptest.InMaps(mptest.Keys(api.SampleBatch{})...)
	alloc := mptest.Allocated(func() {
		sendAll(t, push, frames, enc)
		collect(t, 1, c)
	})
	t.Logf("%d hostile frames: %d bytes allocated", len(frames), alloc)
	if alloc > mptest.AllocBound {
		t.Errorf("allocated %d bytes for %d hostile frames, want at most %d", alloc, len(frames), mptest.AllocBound)
	}
	if got := c.Stats().Malformed; got != int64(len(frames)) {
		t.Errorf("Malformed = %d, want %d", got, len(frames))
	}
}

// TestInferenceServerSurvivesHostileLengths: the same for inference
// requests, under both keys and nested in the observation tensor.
func TestInferenceServerSurvivesHostileLengths(t *testing.T) {
	srv := newServer(t, workertest.Repo(t), 0, nil)
	dealer := rawSocket(t, zmq.DEALER, srv.Addr())
	good := rawRequest(t, map[string]any{
		"ids": api.Tensor[int64]{Shape: []int{1}, Data: []int64{7}},
		"obs": api.Tensor[float32]{Shape: []int{1, obsDim}, Data: obsFor(7)},
	})
	frames := append(mptest.InMaps("ids", "obs"), mptest.Nest("obs", mptest.InMaps("dtype", "shape", "data"))...)
	alloc := mptest.Allocated(func() {
		sendAll(t, dealer, frames, good)
		eventually.True(t, 10*time.Second, "the good request after the hostile ones", func() bool {
			srv.serve(t, 64)
			return srv.Stats().Rows == 1
		})
	})
	t.Logf("%d hostile frames: %d bytes allocated", len(frames), alloc)
	if alloc > mptest.AllocBound {
		t.Errorf("allocated %d bytes for %d hostile frames, want at most %d", alloc, len(frames), mptest.AllocBound)
	}
	if got := srv.Stats().Malformed; got != int64(len(frames)) {
		t.Errorf("Malformed = %d, want %d", got, len(frames))
	}
}
