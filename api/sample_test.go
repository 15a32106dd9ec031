package api

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// validBatch returns a consistent discrete batch of 3 steps whose first
// episode ends at step 1.
func validBatch() SampleBatch {
	return SampleBatch{
		Policy:         "default",
		PolicyVersion:  4,
		Obs:            NewFrames(Tensor[float32]{Shape: []int{3, 2}, Data: []float32{0, 1, 2, 3, 4, 5}}),
		Actions:        Tensor[int32]{Shape: []int{3}, Data: []int32{1, 0, 1}},
		Rewards:        Tensor[float32]{Shape: []int{3}, Data: []float32{1, 1, 0.5}},
		Terminated:     Tensor[uint8]{Shape: []int{3}, Data: []uint8{0, 1, 0}},
		Truncated:      Tensor[uint8]{Shape: []int{3}, Data: []uint8{0, 0, 0}},
		LogProbs:       Tensor[float32]{Shape: []int{3}, Data: []float32{-0.1, -0.2, -0.3}},
		Values:         Tensor[float32]{Shape: []int{3}, Data: []float32{1, 2, 3}},
		BootstrapValue: 2.5,
		Episodes:       []EpisodeStat{{Return: 2, Length: 2}},
		ActorID:        "actor/0",
		AgentID:        "agent_0",
	}
}

func TestSampleBatchRoundTrip(t *testing.T) {
	cont := validBatch()
	cont.Actions = Tensor[int32]{}
	cont.ContActions = Tensor[float32]{Shape: []int{3, 1}, Data: []float32{0.1, 0.2, 0.3}}
	noValues := validBatch()
	noValues.Values, noValues.LogProbs = Tensor[float32]{}, Tensor[float32]{}
	image := validBatch() // three 1x2x1 images: the shape survives the wire
	image.Obs.Shape = []int{3, 1, 2, 1}
	for name, in := range map[string]SampleBatch{"discrete": validBatch(), "continuous": cont, "no values": noValues, "image": image} {
		t.Run(name, func(t *testing.T) {
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
			b, err := msgpack.Marshal(&in)
			if err != nil {
				t.Fatal(err)
			}
			var out SampleBatch
			if err := msgpack.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
			}
			if err := out.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestSampleBatchValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *SampleBatch)
		want   string // "" for valid
	}{
		{"valid", func(*SampleBatch) {}, ""},
		{"empty batch", func(b *SampleBatch) {
			*b = SampleBatch{
				Obs:        NewFrames(NewTensor[float32](0, 2)),
				Actions:    NewTensor[int32](0),
				Rewards:    NewTensor[float32](0),
				Terminated: NewTensor[uint8](0),
				Truncated:  NewTensor[uint8](0),
			}
		}, ""},
		{"inconsistent tensor", func(b *SampleBatch) { b.Values.Data = b.Values.Data[:2] }, "values"},
		{"rewards 2-D", func(b *SampleBatch) { b.Rewards.Shape = []int{3, 1} }, "rewards has shape"},
		{"rewards missing", func(b *SampleBatch) { b.Rewards = Tensor[float32]{} }, "rewards has shape"},
		{"obs short", func(b *SampleBatch) { b.Obs = NewFrames(Tensor[float32]{Shape: []int{2, 3}, Data: make([]float32, 6)}) }, "obs has shape"},
		{"obs 1-D", func(b *SampleBatch) { b.Obs.Shape = []int{6} }, "obs has shape"},
		{"obs images", func(b *SampleBatch) { b.Obs.Shape = []int{3, 1, 2, 1} }, ""},
		{"obs images of another T", func(b *SampleBatch) { b.Obs.Shape = []int{1, 3, 2, 1} }, "obs has shape"},
		{"actions long", func(b *SampleBatch) { b.Actions = NewTensor[int32](4) }, "actions has shape"},
		{"both action kinds", func(b *SampleBatch) { b.ContActions = NewTensor[float32](3, 1) }, "both"},
		{"no actions", func(b *SampleBatch) { b.Actions = Tensor[int32]{} }, "neither"},
		{"cont actions 1-D", func(b *SampleBatch) { b.Actions = Tensor[int32]{}; b.ContActions = NewTensor[float32](3) }, "cont_actions has shape"},
		{"terminated short", func(b *SampleBatch) { b.Terminated = NewTensor[uint8](2) }, "terminated has shape"},
		{"truncated missing", func(b *SampleBatch) { b.Truncated = Tensor[uint8]{} }, "truncated has shape"},
		{"flag not 0/1", func(b *SampleBatch) { b.Truncated.Data[0] = 2 }, "want 0 or 1"},
		{"logprobs wrong", func(b *SampleBatch) { b.LogProbs = NewTensor[float32](2) }, "logprobs has shape"},
		{"too many episodes", func(b *SampleBatch) { b.Episodes = append(b.Episodes, EpisodeStat{1, 1}) }, "episode stats"},
		{"episode length 0", func(b *SampleBatch) { b.Episodes[0].Length = 0 }, "length 0"},
		{"bootstrap NaN", func(b *SampleBatch) { b.BootstrapValue = float32(math.NaN()) }, "bootstrap_value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := validBatch()
			tc.mutate(&b)
			err := b.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSampleBuilder(t *testing.T) {
	b, err := NewSampleBuilder(2, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	b.Policy, b.ActorID, b.AgentID = "p", "a", "agent_0"
	step := func(i int, term, trunc bool, version int64) {
		t.Helper()
		obs := []float32{float32(i), float32(-i)}
		err := b.Append(StepRecord{Obs: obs, Action: Action{Discrete: int32(i % 2)}, Reward: 1,
			Terminated: term, Truncated: trunc, LogProb: -float32(i), Value: float32(i) / 10, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		obs[0] = 99 // the builder must have copied it
	}
	newest := func(want int64, wantOK bool) {
		t.Helper()
		if got, ok := b.NewestVersion(); ok != wantOK || ok && got != want {
			t.Errorf("NewestVersion() = %d, %v; want %d, %v", got, ok, want, wantOK)
		}
	}
	newest(0, false)
	step(0, false, false, 5)
	step(1, false, false, 3)
	if n := len(b.Episodes()); n != 0 {
		t.Errorf("%d episodes before one ended", n)
	}
	step(2, true, false, 4) // an episode of 3 steps ends
	if got, want := b.Episodes(), []EpisodeStat{{Return: 3, Length: 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Episodes() = %+v after the first ended, want %+v", got, want)
	}
	step(3, false, false, 6)
	newest(6, true)
	first := b.Build(7)
	newest(0, false)
	if n := len(b.Episodes()); n != 0 {
		t.Errorf("%d episodes after Build, want none", n)
	}
	if err := first.Validate(); err != nil {
		t.Fatal(err)
	}
	want := SampleBatch{
		Policy:         "p",
		PolicyVersion:  3,
		Obs:            NewFrames(Tensor[float32]{Shape: []int{4, 2}, Data: []float32{0, 0, 1, -1, 2, -2, 3, -3}}),
		Actions:        Tensor[int32]{Shape: []int{4}, Data: []int32{0, 1, 0, 1}},
		Rewards:        Tensor[float32]{Shape: []int{4}, Data: []float32{1, 1, 1, 1}},
		Terminated:     Tensor[uint8]{Shape: []int{4}, Data: []uint8{0, 0, 1, 0}},
		Truncated:      Tensor[uint8]{Shape: []int{4}, Data: []uint8{0, 0, 0, 0}},
		LogProbs:       Tensor[float32]{Shape: []int{4}, Data: []float32{0, -1, -2, -3}},
		Values:         Tensor[float32]{Shape: []int{4}, Data: []float32{0, 0.1, 0.2, 0.3}},
		BootstrapValue: 7,
		Episodes:       []EpisodeStat{{Return: 3, Length: 3}},
		ActorID:        "a",
		AgentID:        "agent_0",
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("first batch:\n got %+v\nwant %+v", first, want)
	}
	snapshot, _ := msgpack.Marshal(&first)

	// The next batch continues the running episode (1 step so far) and must
	// not write into the first batch's arrays.
	step(4, false, false, 8)
	step(5, false, true, 8) // truncated: the episode had 3 steps
	newest(8, true)
	second := b.Build(9)
	if again, _ := msgpack.Marshal(&first); string(again) != string(snapshot) {
		t.Error("building the second batch changed the first")
	}
	if second.Len() != 2 || second.PolicyVersion != 8 || second.BootstrapValue != 9 {
		t.Errorf("second batch: len %d version %d bootstrap %v", second.Len(), second.PolicyVersion, second.BootstrapValue)
	}
	if want := []EpisodeStat{{Return: 3, Length: 3}}; !reflect.DeepEqual(second.Episodes, want) {
		t.Errorf("second batch episodes = %+v, want %+v", second.Episodes, want)
	}

	// A batch ending in termination has no bootstrap value.
	step(6, true, false, 9)
	if third := b.Build(5); third.BootstrapValue != 0 {
		t.Errorf("bootstrap after termination = %v, want 0", third.BootstrapValue)
	}

	// An empty build is a valid empty batch.
	if empty := b.Build(0); empty.Len() != 0 || empty.Validate() != nil {
		t.Errorf("empty build = %+v (%v)", empty, empty.Validate())
	}

	if err := b.Append(StepRecord{Obs: []float32{1}}); err == nil {
		t.Error("Append with a short observation succeeded")
	}
}

func TestSampleBuilderRecycle(t *testing.T) {
	b, err := NewSampleBuilder(3, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	fill := func() {
		for range 8 {
			if err := b.Append(StepRecord{Obs: make([]float32, 3), Action: Action{Continuous: []float32{0.5, -0.5}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill()
	first := b.Build(0)
	if err := first.Validate(); err != nil || first.ContActions.Len() != 16 || !first.Actions.IsZero() {
		t.Fatalf("continuous batch %+v: %v", first, err)
	}
	obs := &first.Obs.Data[0]
	b.Recycle(first)
	fill()
	if next := b.Build(0); &next.Obs.Data[0] != obs {
		t.Error("the batch after Recycle did not reuse the recycled arrays")
	}

	withRecycle := testing.AllocsPerRun(10, func() {
		fill()
		b.Recycle(b.Build(0))
	})
	without := testing.AllocsPerRun(10, func() {
		fill()
		_ = b.Build(0)
	})
	if withRecycle >= without {
		t.Errorf("Recycle saves nothing: %v allocs per batch with it, %v without", withRecycle, without)
	}
	if err := b.Append(StepRecord{Obs: make([]float32, 3), Action: Action{Discrete: 1}}); err == nil {
		t.Error("Append of a discrete action to a continuous builder succeeded")
	}
}

func TestNewSampleBuilderInvalid(t *testing.T) {
	for _, args := range [][3]int{{0, 0, 1}, {2, -1, 1}, {2, 0, -1}, {math.MaxInt32, 0, math.MaxInt32}} {
		if _, err := NewSampleBuilder(args[0], args[1], args[2]); err == nil {
			t.Errorf("NewSampleBuilder%v succeeded", args)
		}
	}
}

// TestSampleBuilderObsShape: a builder given an image's shape builds
// batches of [T, H, W, C] observations, and refuses a shape of another
// size.
func TestSampleBuilderObsShape(t *testing.T) {
	b, err := NewSampleBuilder(6, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]int{nil, {5}, {2, 2, 2}, {3, -2, -1}, make([]int, MaxRank)} {
		if err := b.SetObsShape(bad...); err == nil {
			t.Errorf("SetObsShape(%v) succeeded for 6 values", bad)
		}
	}
	if err := b.SetObsShape(1, 2, 3); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.Append(StepRecord{Obs: make([]float32, 6), Action: Action{Discrete: int32(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	batch := b.Build(0)
	if err := batch.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := []int{2, 1, 2, 3}; !reflect.DeepEqual(batch.Obs.Shape, want) || batch.Obs.Len() != 12 {
		t.Errorf("obs of shape %v and %d values, want %v and 12", batch.Obs.Shape, batch.Obs.Len(), want)
	}
	if empty := b.Build(0); !reflect.DeepEqual(empty.Obs.Shape, []int{0, 1, 2, 3}) || empty.Validate() != nil {
		t.Errorf("empty batch: obs of shape %v (%v), want [0 1 2 3]", empty.Obs.Shape, empty.Validate())
	}
}

// TestSampleBatchDecodeTruncated decodes every prefix of a valid encoding:
// each must fail cleanly, never panic.
func TestSampleBatchDecodeTruncated(t *testing.T) {
	in := validBatch()
	b, err := msgpack.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		var out SampleBatch
		if err := msgpack.Unmarshal(b[:n], &out); err == nil {
			t.Fatalf("decoding %d of %d bytes succeeded", n, len(b))
		}
	}
}
