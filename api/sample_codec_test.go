package api

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// reflectedSampleBatch and reflectedEpisodeStat have SampleBatch's and
// EpisodeStat's fields and tags and no codec of their own: what msgpack's
// reflection writes and reads, which the hand-written codec must match.
type reflectedSampleBatch struct {
	Policy         string                 `msgpack:"policy"`
	PolicyVersion  int64                  `msgpack:"policy_version"`
	Obs            Frames                 `msgpack:"obs"`
	Actions        Tensor[int32]          `msgpack:"actions"`
	ContActions    Tensor[float32]        `msgpack:"cont_actions"`
	Rewards        Tensor[float32]        `msgpack:"rewards"`
	Terminated     Tensor[uint8]          `msgpack:"terminated"`
	Truncated      Tensor[uint8]          `msgpack:"truncated"`
	LogProbs       Tensor[float32]        `msgpack:"logprobs"`
	Values         Tensor[float32]        `msgpack:"values"`
	BootstrapValue float32                `msgpack:"bootstrap_value"`
	Episodes       []reflectedEpisodeStat `msgpack:"episodes"`
	ActorID        string                 `msgpack:"actor_id"`
	AgentID        string                 `msgpack:"agent_id"`
}

type reflectedEpisodeStat struct {
	Return float32 `msgpack:"return"`
	Length int32   `msgpack:"length"`
}

func reflected(b SampleBatch) reflectedSampleBatch {
	r := reflectedSampleBatch{b.Policy, b.PolicyVersion, b.Obs, b.Actions, b.ContActions, b.Rewards,
		b.Terminated, b.Truncated, b.LogProbs, b.Values, b.BootstrapValue, nil, b.ActorID, b.AgentID}
	if b.Episodes != nil {
		r.Episodes = make([]reflectedEpisodeStat, len(b.Episodes))
		for i, e := range b.Episodes {
			r.Episodes[i] = reflectedEpisodeStat(e)
		}
	}
	return r
}

func sampleBatchCases() map[string]SampleBatch {
	cont := validBatch()
	cont.Actions = Tensor[int32]{}
	cont.ContActions = Tensor[float32]{Shape: []int{3, 1}, Data: []float32{0.1, 0.2, 0.3}}
	noValues := validBatch()
	noValues.Values, noValues.LogProbs = Tensor[float32]{}, Tensor[float32]{}
	noEpisodes, emptyEpisodes := validBatch(), validBatch()
	noEpisodes.Episodes, emptyEpisodes.Episodes = nil, []EpisodeStat{}
	binary := validBatch() // MinAtar-like: the observations travel packed
	binary.Obs = NewFrames(Tensor[float32]{Shape: []int{3, 2, 2, 1}, Data: []float32{0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0}})
	extremes := validBatch()
	extremes.PolicyVersion, extremes.BootstrapValue = math.MinInt64, -math.MaxFloat32
	extremes.Episodes = []EpisodeStat{{Return: float32(math.Inf(-1)), Length: math.MaxInt32}, {Return: 0, Length: 1}}
	extremes.Policy, extremes.ActorID, extremes.AgentID = strings.Repeat("p", 300), "", "ü"
	return map[string]SampleBatch{
		"discrete": validBatch(), "continuous": cont, "no values": noValues, "no episodes": noEpisodes,
		"empty episodes": emptyEpisodes, "binary frames": binary, "extremes": extremes, "zero": {},
	}
}

// The codec writes what reflection writes, byte for byte, and reads it
// back to what reflection reads.
func TestSampleBatchWireMatchesReflection(t *testing.T) {
	for name, b := range sampleBatchCases() {
		t.Run(name, func(t *testing.T) {
			want, err := msgpack.Marshal(reflected(b))
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []any{b, &b} {
				got, err := msgpack.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("encoding of %T differs from reflection:\n got %x\nwant %x", v, got, want)
				}
			}
			var back SampleBatch
			if err := msgpack.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			var viaReflection reflectedSampleBatch
			if err := msgpack.Unmarshal(want, &viaReflection); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reflected(back), viaReflection) {
				t.Fatalf("decoded %+v, reflection decodes %+v", back, viaReflection)
			}
			// Decoded frames say whether they came packed (TestFramesBinary);
			// made ones never do.
			back.Obs.binary = false
			if !reflect.DeepEqual(back, b) {
				t.Fatalf("round trip gave %+v, want %+v", back, b)
			}
		})
	}
}

// Decoding takes what reflection takes: keys in any order, unknown keys
// (and unknown keys of an episode) skipped, nil as the zero batch; and
// refuses what does not fit.
func TestSampleBatchDecode(t *testing.T) {
	enc := func(v any) []byte {
		t.Helper()
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := validBatch()
	shuffled := map[string]any{
		"agent_id": want.AgentID, "episodes": []map[string]any{{"length": 2, "extra": []int{1}, "return": float32(2)}},
		"values": want.Values, "bootstrap_value": float32(2.5), "future": "skipped", "obs": want.Obs, "actions": want.Actions,
		"rewards": want.Rewards, "terminated": want.Terminated, "truncated": want.Truncated, "logprobs": want.LogProbs,
		"policy_version": 4, "actor_id": want.ActorID, "policy": want.Policy,
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		want    SampleBatch
		wantErr string
	}{
		{"keys shuffled, unknown keys skipped", enc(shuffled), want, ""},
		{"nil", enc(nil), SampleBatch{}, ""},
		{"episode length beyond int32", enc(map[string]any{"episodes": []map[string]any{{"length": int64(1) << 40}}}), SampleBatch{}, "out of int32's range"},
		{"episodes not an array", enc(map[string]any{"episodes": "x"}), SampleBatch{}, "episodes"},
		{"policy not a string", enc(map[string]any{"policy": []int{1}}), SampleBatch{}, "policy"},
		{"tensor malformed", enc(map[string]any{"rewards": 3}), SampleBatch{}, "rewards"},
		{"not a map", enc([]int{1, 2}), SampleBatch{}, "SampleBatch"},
		{"truncated", enc(want)[:40], SampleBatch{}, "SampleBatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got SampleBatch
			checkDecoded(t, msgpack.Unmarshal(tc.in, &got), tc.wantErr, got, tc.want)
		})
	}
}

// checkDecoded checks a decode's outcome: an error mentioning wantErr, or
// with wantErr "" no error and got equal to want.
func checkDecoded[V any](t *testing.T, err error, wantErr string, got, want V) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one mentioning %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// cartPoleBatch is a batch as a CartPole actor cuts it: 27 steps (an
// untrained policy's episode) of 4 observations, one episode.
func cartPoleBatch() SampleBatch {
	const T = 27
	b := SampleBatch{
		Policy: "default", PolicyVersion: 12, ActorID: "actor/0", AgentID: "agent_0",
		Obs:        NewFrames(Tensor[float32]{Shape: []int{T, 4}, Data: make([]float32, T*4)}),
		Actions:    Tensor[int32]{Shape: []int{T}, Data: make([]int32, T)},
		Rewards:    Tensor[float32]{Shape: []int{T}, Data: make([]float32, T)},
		Terminated: Tensor[uint8]{Shape: []int{T}, Data: make([]uint8, T)},
		Truncated:  Tensor[uint8]{Shape: []int{T}, Data: make([]uint8, T)},
		LogProbs:   Tensor[float32]{Shape: []int{T}, Data: make([]float32, T)},
		Values:     Tensor[float32]{Shape: []int{T}, Data: make([]float32, T)},
		Episodes:   []EpisodeStat{{Return: T, Length: T}},
	}
	for i := range b.Obs.Data {
		b.Obs.Data[i] = float32(i)*0.01 + 0.005 // not binary: travels as a tensor
	}
	b.Terminated.Data[T-1] = 1
	return b
}

// BenchmarkSampleBatchCodec encodes and decodes a CartPole batch into a
// new SampleBatch, as an actor and a sink do, through the codec and
// through msgpack's reflection (reflectedSampleBatch), the way before it.
func BenchmarkSampleBatchCodec(b *testing.B) {
	in := cartPoleBatch()
	for _, c := range []struct {
		name string
		in   any
		out  func() any
	}{
		{"codec", &in, func() any { return new(SampleBatch) }},
		{"reflection", reflected(in), func() any { return new(reflectedSampleBatch) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			dec := msgpack.NewDecoder(nil)
			var rd bytes.Reader
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := enc.Encode(c.in); err != nil {
					b.Fatal(err)
				}
				rd.Reset(buf.Bytes())
				dec.Reset(&rd)
				if err := dec.Decode(c.out()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A batch decoded into one that held another is what a fresh decode
// gives; it keeps the storage that fits (tensors, episodes, equal
// strings), so that a consumer reusing its batches allocates nothing; and
// a field whose key is absent is zero, not the last batch's.
func TestSampleBatchDecodeReuses(t *testing.T) {
	first, second := cartPoleBatch(), cartPoleBatch()
	second.PolicyVersion, second.Rewards.Data[3], second.Episodes[0].Length = 13, 7, 26
	wire := func(b SampleBatch) []byte {
		t.Helper()
		out, err := msgpack.Marshal(&b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var into SampleBatch
	if err := msgpack.Unmarshal(wire(first), &into); err != nil {
		t.Fatal(err)
	}
	obs, policy, episodes := unsafe.SliceData(into.Obs.Data), unsafe.StringData(into.Policy), unsafe.SliceData(into.Episodes)
	frame := wire(second)
	if err := msgpack.Unmarshal(frame, &into); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(into, second) {
		t.Fatalf("decoded into a used batch: %+v, want %+v", into, second)
	}
	if unsafe.SliceData(into.Obs.Data) != obs || unsafe.StringData(into.Policy) != policy || unsafe.SliceData(into.Episodes) != episodes {
		t.Error("the observations, the policy's name or the episodes were not decoded into the storage that held the last batch's")
	}
	dec := msgpack.NewDecoder(nil)
	var rd bytes.Reader
	n := testing.AllocsPerRun(100, func() {
		rd.Reset(frame)
		dec.Reset(&rd)
		if err := dec.Decode(&into); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 && !raceEnabled {
		t.Errorf("decoding a batch of the same actor into the last one allocates %v times, want 0", n)
	}

	partial, err := msgpack.Marshal(map[string]any{"rewards": second.Rewards, "actor_id": "actor/1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := msgpack.Unmarshal(partial, &into); err != nil {
		t.Fatal(err)
	}
	if want := (SampleBatch{Rewards: second.Rewards, ActorID: "actor/1"}); !reflect.DeepEqual(into, want) {
		t.Fatalf("absent keys kept the last batch's fields: %+v", into)
	}
}

// A string whose header claims more than the frame holds is an error, and
// commits memory only as the bytes come.
func TestSampleBatchDecodeHostileString(t *testing.T) {
	frame := []byte{0x81, 0xa6, 'p', 'o', 'l', 'i', 'c', 'y', 0xdb, 0x40, 0, 0, 0, 'x'} // policy: str32 of 1 GiB, one byte
	var b SampleBatch
	b.Policy = "default"
	allocs := testing.AllocsPerRun(10, func() {
		if err := msgpack.Unmarshal(frame, &b); err == nil || !strings.Contains(err.Error(), "policy") {
			t.Fatalf("error %v, want one about the policy", err)
		}
	})
	if allocs > 20 {
		t.Errorf("%v allocations for a 14-byte frame", allocs)
	}
}
