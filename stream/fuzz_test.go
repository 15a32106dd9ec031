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
		// The fast path decodes as the general decoder does.
		var ids, genIDs api.Tensor[int64]
		var obs, genObs api.Tensor[float32]
		err := decodeRequest(d, in, &ids, &obs)
		fastWire = false
		errGen := decodeRequest(d, in, &genIDs, &genObs)
		fastWire = true
		if (err == nil) != (errGen == nil) {
			t.Fatalf("fast path: %v; general: %v", err, errGen)
		}
		if err == nil && (!sameTensor(ids, genIDs) || !sameTensor(obs, genObs)) {
			t.Fatalf("fast path %+v %+v, general %+v %+v", ids, obs, genIDs, genObs)
		}
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
		if errFresh == nil && (!sameReply(inf, used) || !sameTensor(ids, usedIDs)) {
			t.Fatalf("fresh %+v %+v, into a used Inference %+v %+v", ids, inf, usedIDs, used)
		}
		// The fast path decodes as the general decoder does.
		var genIDs api.Tensor[int64]
		var gen api.Inference
		fastWire = false
		refGen, errGen := decodeReply(d, in, &genIDs, &gen)
		fastWire = true
		if (errFresh == nil) != (errGen == nil) || refFresh != refGen {
			t.Fatalf("fast path: %q, %v; general: %q, %v", refFresh, errFresh, refGen, errGen)
		}
		if errFresh == nil && (!sameReply(inf, gen) || !sameTensor(ids, genIDs)) {
			t.Fatalf("fast path %+v %+v, general %+v %+v", ids, inf, genIDs, gen)
		}
	})
}

// sameTensor compares bit for bit, NaNs included: their encodings.
func sameTensor[T api.Numeric](a, b api.Tensor[T]) bool {
	ab, errA := msgpack.Marshal(a)
	bb, errB := msgpack.Marshal(b)
	return errA == nil && errB == nil && string(ab) == string(bb) &&
		reflect.DeepEqual(a.Shape, b.Shape) && (a.Data == nil) == (b.Data == nil)
}

func sameReply(a, b api.Inference) bool {
	return sameTensor(a.Actions, b.Actions) && sameTensor(a.ContActions, b.ContActions) &&
		sameTensor(a.LogProbs, b.LogProbs) && sameTensor(a.Values, b.Values) && a.Version == b.Version
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
		if errFresh == nil && !sameBatch(batch, used) {
			t.Fatalf("fresh %+v, into a used batch %+v", batch, used)
		}
		// The fast path decodes as the general decoder does, into a used
		// batch too.
		for _, start := range []func() api.SampleBatch{func() api.SampleBatch { return api.SampleBatch{} }, func() api.SampleBatch {
			var u api.SampleBatch
			if err := decodeSampleBatch(d, good, &u); err != nil {
				t.Fatal(err)
			}
			return u
		}} {
			fast, gen := start(), start()
			errFast := decodeSampleBatch(d, in, &fast)
			fastWire = false
			errGen := decodeSampleBatch(d, in, &gen)
			fastWire = true
			if (errFast == nil) != (errGen == nil) {
				t.Fatalf("fast path: %v; general: %v", errFast, errGen)
			}
			if errFast == nil && !sameBatch(fast, gen) {
				t.Fatalf("fast path %+v, general %+v", fast, gen)
			}
		}
	})
}

// sameBatch compares bit for bit (NaNs included): their encodings, and
// nil against empty where the encoding does not tell them apart.
func sameBatch(a, b api.SampleBatch) bool {
	ab, errA := msgpack.Marshal(a)
	bb, errB := msgpack.Marshal(b)
	return errA == nil && errB == nil && string(ab) == string(bb) && (a.Episodes == nil) == (b.Episodes == nil)
}
