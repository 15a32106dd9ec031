package replaystream

import (
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

// The fuzz targets of the replay wire's decoder: whatever a frame holds,
// decoding it fails or succeeds within an allocation bound set by its
// size.

func FuzzDecodeRequest(f *testing.F) {
	req := &Request{Op: OpInsert, RID: 7, Table: "t", TimeoutMs: 100, Items: [][]byte{{1, 2}, {3}},
		Priorities: api.Tensor[float64]{Shape: []int{2}, Data: []float64{1, 2}}}
	b, err := msgpack.Marshal(req)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	mptest.Seed(f, mptest.InMaps(mptest.Keys(Request{})...))
	d := zsock.NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			var r Request
			if decode(d, in, &r) == nil {
				_ = r.validate()
			}
		})
	})
}

func FuzzDecodeReply(f *testing.F) {
	rep := &Reply{Op: OpSample, RID: 7, Items: [][]byte{{1}}, IDs: api.Tensor[int64]{Shape: []int{1}, Data: []int64{5}},
		Priorities: api.Tensor[float64]{Shape: []int{1}, Data: []float64{1}}, Size: 3}
	b, err := msgpack.Marshal(rep)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	mptest.Seed(f, mptest.InMaps(mptest.Keys(Reply{})...))
	d := zsock.NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			var r Reply
			_ = decode(d, in, &r)
		})
	})
}
