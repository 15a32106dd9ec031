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
	// The codec, and msgpack's reflection it replaced (the ratio).
	reflection := func(d *zsock.Decoder, item []byte, tr *Transition) error {
		dec, err := d.Reset(item)
		if err != nil {
			return err
		}
		return dec.Decode(tr)
	}
	for _, c := range []struct {
		name   string
		decode func(*zsock.Decoder, []byte, *Transition) error
	}{{"codec", DecodeTransition}, {"reflection", reflection}} {
		b.Run(c.name, func(b *testing.B) {
			d := zsock.NewDecoder()
			var tr Transition
			for b.Loop() {
				if err := c.decode(d, item, &tr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// DecodeTransition reads what msgpack writes for a Transition as msgpack's
// reflection reads it, into fresh and used values alike; a key the item
// leaves out is zero, and one it does not know is skipped.
func TestDecodeTransitionMatchesReflection(t *testing.T) {
	binary := make([]float32, 400)
	for i := range binary {
		binary[i] = float32(i % 7 / 6)
	}
	used := func() Transition {
		return Transition{Obs: frames([]int{3}, 9, 9, 9), NextObs: frames([]int{3}, 8, 8, 8), Action: 5, Reward: 7,
			RewardVec: api.Tensor[float32]{Shape: []int{2}, Data: []float32{6, 6}}, Discount: 0.5, NStepReturn: 4, LambdaReturn: 3, Priority: 2}
	}
	for _, tc := range []struct {
		name string
		tr   Transition
	}{
		{"minatar", Transition{Obs: frames([]int{10, 10, 4}, binary...), NextObs: frames([]int{10, 10, 4}, binary...),
			Action: 3, Reward: 1, Discount: 0.97, Priority: 1}},
		{"cartpole", Transition{Obs: frames([]int{4}, 0.1, -0.2, 0.3, 0.04), NextObs: frames([]int{4}, 0.2, 0.1, -0.5, 1),
			Action: 1, Reward: 2.5, Discount: 0.9, NStepReturn: 3.25, LambdaReturn: 3.5, Priority: 0.75}},
		{"reward vector", Transition{Obs: frames([]int{2}, 1, 0), NextObs: frames([]int{2}, 0, 1),
			RewardVec: api.Tensor[float32]{Shape: []int{3}, Data: []float32{1, -1, 0.5}}, Reward: 0.5}},
		{"zero", Transition{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item, err := msgpack.Marshal(&tc.tr)
			if err != nil {
				t.Fatal(err)
			}
			var want Transition
			if err := msgpack.Unmarshal(item, &want); err != nil {
				t.Fatal(err)
			}
			d := zsock.NewDecoder()
			for _, into := range []Transition{{}, used()} {
				got := into
				if err := DecodeTransition(d, item, &got); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
					t.Errorf("into %+v:\ngot  %+v\nwant %+v", into.Action, got, want)
				}
			}
		})
	}
	// Keys left out are zero; unknown ones are skipped.
	item, err := msgpack.Marshal(map[string]any{"obs": frames([]int{1}, 1), "next_obs": frames([]int{1}, 0), "action": 2,
		"future_key": []int{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	got := used()
	if err := DecodeTransition(zsock.NewDecoder(), item, &got); err != nil {
		t.Fatal(err)
	}
	if got.Action != 2 || got.Reward != 0 || got.Priority != 0 || !got.RewardVec.IsZero() || got.Obs.Data[0] != 1 || len(got.NextObs.Data) != 1 {
		t.Errorf("decoded %+v", got)
	}
}
