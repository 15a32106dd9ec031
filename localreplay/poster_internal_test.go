package localreplay

import (
	"bytes"
	"testing"

	"github.com/distrl/distrl/api"
)

// stepsBatch is a batch of CartPole-shaped steps with distinct
// observations, rewards and values; ends marks the steps that terminated
// ('t') or were truncated ('c'), '.' the others.
func stepsBatch(ends string) *api.SampleBatch {
	n := len(ends)
	b := &api.SampleBatch{
		Obs:        api.NewFrames(api.Tensor[float32]{Shape: []int{n, 4}, Data: make([]float32, 4*n)}),
		Actions:    api.Tensor[int32]{Shape: []int{n}, Data: make([]int32, n)},
		Rewards:    api.Tensor[float32]{Shape: []int{n}, Data: make([]float32, n)},
		Terminated: api.Tensor[uint8]{Shape: []int{n}, Data: make([]uint8, n)},
		Truncated:  api.Tensor[uint8]{Shape: []int{n}, Data: make([]uint8, n)},
		Values:     api.Tensor[float32]{Shape: []int{n}, Data: make([]float32, n)},
	}
	for t := range n {
		for i := range 4 {
			b.Obs.Data[4*t+i] = float32(100*t + i)
		}
		b.Actions.Data[t] = int32(t % 2)
		b.Rewards.Data[t] = float32(t%3) + 0.5
		b.Values.Data[t] = float32(t) / 7
		b.Terminated.Data[t] = boolByte(ends[t] == 't')
		b.Truncated.Data[t] = boolByte(ends[t] == 'c')
	}
	return b
}

func boolByte(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

// slice is steps [from, to) of b as a batch of its own.
func slice(b *api.SampleBatch, from, to int) *api.SampleBatch {
	n := to - from
	return &api.SampleBatch{
		Obs:        api.NewFrames(api.Tensor[float32]{Shape: []int{n, 4}, Data: b.Obs.Data[4*from : 4*to]}),
		Actions:    api.Tensor[int32]{Shape: []int{n}, Data: b.Actions.Data[from:to]},
		Rewards:    api.Tensor[float32]{Shape: []int{n}, Data: b.Rewards.Data[from:to]},
		Terminated: api.Tensor[uint8]{Shape: []int{n}, Data: b.Terminated.Data[from:to]},
		Truncated:  api.Tensor[uint8]{Shape: []int{n}, Data: b.Truncated.Data[from:to]},
		Values:     api.Tensor[float32]{Shape: []int{n}, Data: b.Values.Data[from:to]},
	}
}

// A batch holding several episodes gives the replay the transitions the
// same steps gave when the actor cut a batch at every episode end: n-step
// returns stop at each termination, a truncated or cut-off segment drops
// its last step and bootstraps from its value.
func TestPosterSegmentsMatchBatchPerEpisode(t *testing.T) {
	for _, c := range []struct {
		name string
		ends string
		cuts []int // where the actor used to cut the same steps
	}{
		{"one episode", "....t", []int{5}},
		{"two terminated, a tail", "...t.....t...", []int{4, 10, 13}},
		{"terminations in a row", "t.t.tt..", []int{1, 3, 5, 6, 8}},
		{"a truncation inside", "..c...t..", []int{3, 7, 9}},
		{"ends terminated", ".t..t", []int{2, 5}},
		{"one step", ".", []int{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := PosterOptions{Gamma: 0.9, NStep: 3}
			whole := &Poster{opts: opts}
			b := stepsBatch(c.ends)
			if err := whole.convert(b); err != nil {
				t.Fatal(err)
			}
			cut := &Poster{opts: opts}
			from := 0
			for _, to := range c.cuts {
				if err := cut.convert(slice(b, from, to)); err != nil {
					t.Fatal(err)
				}
				from = to
			}
			if len(whole.outbox) != len(cut.outbox) {
				t.Fatalf("%d transitions from the whole batch, %d from the batches cut at episode ends", len(whole.outbox), len(cut.outbox))
			}
			for i := range whole.outbox {
				w, c := whole.outbox[i], cut.outbox[i]
				if w.priority != c.priority || !bytes.Equal(w.data, c.data) {
					t.Fatalf("transition %d differs: priority %v vs %v", i, w.priority, c.priority)
				}
			}
		})
	}
}
