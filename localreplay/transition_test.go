package localreplay

import (
	"fmt"
	"testing"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/vmihailenco/msgpack/v5"
)

func frames(shape []int, data ...float32) api.Frames {
	return api.NewFrames(api.Tensor[float32]{Shape: shape, Data: data})
}

// A whole transition of two MinAtar frames shrinks about 25-fold.
func TestTransitionOfBinaryFramesIsPacked(t *testing.T) {
	obs := make([]float32, 1000)
	for i := range obs {
		obs[i] = float32(i % 3 / 2)
	}
	tr := Transition{Obs: frames([]int{10, 10, 10}, obs...), NextObs: frames([]int{10, 10, 10}, obs...), Action: 3, Reward: 1, Discount: 0.97}
	packed, err := msgpack.Marshal(&tr)
	if err != nil {
		t.Fatal(err)
	}
	obs[0] = 0.5
	float, err := msgpack.Marshal(&tr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("transition: %d bytes packed, %d as float32", len(packed), len(float))
	if len(packed)*20 > len(float) {
		t.Errorf("packed %d bytes, float32 %d: want a 20-fold saving at least", len(packed), len(float))
	}
	var back Transition
	if err := msgpack.Unmarshal(packed, &back); err != nil {
		t.Fatal(err)
	}
	obs[0] = 0
	if fmt.Sprint(back.Obs.Data) != fmt.Sprint(obs) || back.Action != 3 || back.Discount != 0.97 {
		t.Errorf("decoded %+v", back)
	}
}

func FuzzDecodeTransition(f *testing.F) {
	for _, tr := range []Transition{
		{Obs: frames([]int{2, 2}, 1, 0, 0, 1), NextObs: frames([]int{2, 2}, 0, 0, 1, 1), Action: 1, Reward: 1},
		{Obs: frames([]int{2}, 0.5, 1), NextObs: frames([]int{2}, 1, 0.25), Discount: 0.9},
	} {
		b, err := msgpack.Marshal(&tr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	mptest.Seed(f, mptest.InMaps(mptest.Keys(Transition{})...))
	d := zsock.NewDecoder()
	f.Fuzz(func(t *testing.T, in []byte) {
		mptest.BoundedAlloc(t, in, func() {
			var tr Transition
			if DecodeTransition(d, in, &tr) != nil {
				return
			}
			// What decodes encodes again, and decodes to the same.
			b, err := msgpack.Marshal(&tr)
			if err != nil {
				t.Fatalf("re-encoding a decoded transition: %v", err)
			}
			var back Transition
			if err := msgpack.Unmarshal(b, &back); err != nil {
				t.Fatalf("decoding a re-encoded transition: %v", err)
			}
		})
	})
}

// BenchmarkDecodeTransition decodes one MinAtar Breakout transition (two
// packed 10x10x4 frames) into reused storage, as a DQN trainer decodes
// every transition it samples.
func BenchmarkDecodeTransition(b *testing.B) {
	obs := make([]float32, 400)
	for i := range obs {
		obs[i] = float32(i % 7 / 6)
	}
	item, err := msgpack.Marshal(&Transition{Obs: frames([]int{10, 10, 4}, obs...), NextObs: frames([]int{10, 10, 4}, obs...),
		Action: 3, Reward: 1, Discount: 0.97, Priority: 1})
	if err != nil {
		b.Fatal(err)
	}
	d := zsock.NewDecoder()
	var tr Transition
	for b.Loop() {
		if err := DecodeTransition(d, item, &tr); err != nil {
			b.Fatal(err)
		}
	}
}
