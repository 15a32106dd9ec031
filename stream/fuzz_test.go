package stream

import (
	"reflect"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

// The fuzz targets of the data plane's decoders: whatever a frame holds,
// decoding it fails or succeeds within an allocation bound set by its
// size. Their seeds are valid messages and hostile ones whose headers
// claim gigabytes.

func FuzzDecodeInferenceRequest(f *testing.F) {
	e := zsock.NewEncoder()
	ids := api.Tensor[int64]{Shape: []int{2}, Data: []int64{1, 2}}
	obs := api.Tensor[float32]{Shape: []int{2, 3}, Data: make([]float32, 6)}
	if err := encodeRequest(e.Reset(), ids, obs); err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte(nil), e.Bytes()...))
	mptest.Seed(f, mptest.InMaps(keyIDs, keyObs))
	d := zsock.NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			var ids api.Tensor[int64]
			var obs api.Tensor[float32]
			_ = decodeRequest(d, in, &ids, &obs)
		})
	})
}

func FuzzDecodeInferenceReply(f *testing.F) {
	e := zsock.NewEncoder()
	ids := api.Tensor[int64]{Shape: []int{2}, Data: []int64{1, 2}}
	inf := &api.Inference{Actions: api.Tensor[int32]{Shape: []int{2}, Data: []int32{0, 1}}, Version: 3}
	if err := encodeReply(e.Reset(), ids, inf); err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte(nil), e.Bytes()...))
	if err := encodeRefusal(e.Reset(), ids, "observations have 3 values, policy \"default\" wants 4"); err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte(nil), e.Bytes()...))
	mptest.Seed(f, mptest.InMaps(keyIDs, keyInference, keyError), mptest.Nest(keyInference, mptest.InMaps(mptest.Keys(api.Inference{})...)))
	if err := encodeReply(e.Reset(), ids, inf); err != nil {
		f.Fatal(err)
	}
	good := append([]byte(nil), e.Bytes()...)
	d := zsock.NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		var ids api.Tensor[int64]
		var inf api.Inference
		mptest.BoundedAlloc(t, in, func() {
			_, _ = decodeReply(d, in, &ids, &inf)
		})
		// Decoded into the Inference of an earlier reply (a client's),
		// the frame reads the same.
		var usedIDs api.Tensor[int64]
		var used api.Inference
		if _, err := decodeReply(d, good, &usedIDs, &used); err != nil {
			t.Fatal(err)
		}
		refFresh, errFresh := decodeReply(d, in, &ids, &inf)
		refUsed, errUsed := decodeReply(d, in, &usedIDs, &used)
		if (errFresh == nil) != (errUsed == nil) || refFresh != refUsed {
			t.Fatalf("fresh: %q, %v; into a used Inference: %q, %v", refFresh, errFresh, refUsed, errUsed)
		}
		if errFresh == nil && (!reflect.DeepEqual(inf, used) || !reflect.DeepEqual(ids, usedIDs)) {
			t.Fatalf("fresh %+v %+v, into a used Inference %+v %+v", ids, inf, usedIDs, used)
		}
	})
}

func FuzzDecodeSampleBatch(f *testing.F) {
	b, err := api.NewSampleBuilder(2, 0, 3)
	if err != nil {
		f.Fatal(err)
	}
	b.ActorID, b.AgentID, b.Policy = "actor/0", "0", "default"
	for s := range 3 {
		if err := b.Append(api.StepRecord{Obs: []float32{1, 2}, Reward: 1, Terminated: s == 2}); err != nil {
			f.Fatal(err)
		}
	}
	good, err := msgpack.Marshal(b.Build(0.5))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	mptest.Seed(f, mptest.InMaps(mptest.Keys(api.SampleBatch{})...))
	d := zsock.NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		var batch api.SampleBatch
		mptest.BoundedAlloc(t, in, func() {
			_ = decodeSampleBatch(d, in, &batch)
		})
		// Decoded into a batch that held another (a sink's, with
		// SampleConsumerOptions.Reuse), the frame reads the same.
		var used api.SampleBatch
		if err := decodeSampleBatch(d, good, &used); err != nil {
			t.Fatal(err)
		}
		errFresh, errUsed := decodeSampleBatch(d, in, &batch), decodeSampleBatch(d, in, &used)
		if (errFresh == nil) != (errUsed == nil) {
			t.Fatalf("fresh: %v; into a used batch: %v", errFresh, errUsed)
		}
		if errFresh == nil && !reflect.DeepEqual(batch, used) {
			t.Fatalf("fresh %+v, into a used batch %+v", batch, used)
		}
	})
}
