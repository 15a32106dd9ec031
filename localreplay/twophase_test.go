package localreplay

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/stattest"
	"github.com/distrl/distrl/replay"
)

// actors returns k memories of different sizes and priority scales.
func actors(t *testing.T, k int, alpha float64) []*Memory {
	r := rand.New(rand.NewPCG(42, 1))
	out := make([]*Memory, k)
	for a := range k {
		m := mustMemory(t, Config{FrameSize: 1, Gamma: 0, Alpha: alpha, MaxTransitions: 100, MaxEpisodes: 20, Seed: uint64(a)})
		for range 2 + a { // actor a: 2+a episodes of 6 steps
			n := 6
			rewards, values := make([]float32, n), make([]float32, n)
			for i := range n {
				rewards[i] = float32(r.Float64() * float64(a+1) * 3) // larger errors for later actors
			}
			play(t, m, rewards, values, true, 0)
		}
		m.TakeNew()
		out[a] = m
	}
	return out
}

// drawTwoPhase runs rounds of both phases: each actor pushes a fresh cache
// of m items into a server table sampled with alpha 1 (one cache per actor
// held), and the server draws b. serverPriority gives each cached item its
// server priority. It returns counts per (actor, key) bin.
func drawTwoPhase(t *testing.T, mems []*Memory, rounds, m, b int, serverPriority func(Cache) float64) map[[2]uint64]int {
	counts := map[[2]uint64]int{}
	for round := range rounds {
		tb, err := replay.NewTable(replay.Options{Name: "server", MaxSize: len(mems) * m, Sampler: replay.Prioritized,
			Remover: replay.RemoveFIFO, Alpha: 1, Seed: uint64(round)})
		if err != nil {
			t.Fatal(err)
		}
		for a, mem := range mems {
			c, err := mem.SampleCache(m)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range c.Items {
				var d [16]byte
				binary.LittleEndian.PutUint64(d[:], uint64(a))
				binary.LittleEndian.PutUint64(d[8:], it.Key)
				if _, err := tb.TryInsert(serverPriority(c), d[:]); err != nil {
					t.Fatal(err)
				}
			}
		}
		s, err := tb.TrySample(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range s {
			counts[[2]uint64{binary.LittleEndian.Uint64(it.Data), binary.LittleEndian.Uint64(it.Data[8:])}]++
		}
	}
	return counts
}

// unionProbs is direct sampling from the union: p^alpha / S over every
// transition of every actor.
func unionProbs(mems []*Memory, alpha float64) (bins [][2]uint64, probs []float64) {
	total := 0.0
	for a, mem := range mems {
		for _, e := range mem.closed {
			for i, tr := range e.trans {
				bins = append(bins, [2]uint64{uint64(a), e.key + uint64(i)})
				p := math.Pow(float64(tr.Priority), alpha)
				probs = append(probs, p)
				total += p
			}
		}
	}
	for i := range probs {
		probs[i] /= total
	}
	return bins, probs
}

// The two phases together sample the union of the actors' memories: the
// frequencies pass a chi-square test against direct sampling (fixed
// seeds), while a server that ignores the actors' masses fails it.
func TestTwoPhaseMatchesUnion(t *testing.T) {
	const alpha = 0.7
	mems := actors(t, 4, alpha)
	bins, probs := unionProbs(mems, alpha)
	test := func(counts map[[2]uint64]int) (float64, int, float64) {
		obs := make([]int, len(bins))
		for i, b := range bins {
			obs[i] = counts[b]
		}
		stat, dof, p, err := stattest.ChiSquare(obs, probs)
		if err != nil {
			t.Fatal(err)
		}
		return stat, dof, p
	}
	// One server draw per round: each draw is then independent of the
	// others, and its distribution is the two phases' marginal, so the
	// counts are multinomial as the chi-square test assumes (many draws from
	// one cache are correlated: unbiased, but spread wider).
	stat, dof, p := test(drawTwoPhase(t, mems, 4000, 16, 1, Cache.ServerPriority))
	t.Logf("two-phase: chi-square %.1f, %d dof, p = %.3g", stat, dof, p)
	if p < 0.001 {
		t.Fatalf("two-phase frequencies differ from the union: chi-square %.1f, %d dof, p = %.3g", stat, dof, p)
	}
	stat, dof, p = test(drawTwoPhase(t, mems, 4000, 16, 1, func(Cache) float64 { return 1 }))
	t.Logf("naive server: chi-square %.1f, %d dof, p = %.3g", stat, dof, p)
	if p > 1e-6 {
		t.Fatalf("the test cannot tell a server that ignores the actors' masses: p = %.3g", p)
	}
}
