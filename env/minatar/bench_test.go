package minatar

import (
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
)

// BenchmarkStep measures steps per second of each game under a random
// policy, with resets as episodes end.
func BenchmarkStep(b *testing.B) {
	for _, name := range Games() {
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, name, DefaultOptions())
			rng := rand.New(rand.NewPCG(5, 5))
			actions := make([]api.Action, 1)
			seed := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				actions[0].Discrete = int32(rng.IntN(int(NumActions)))
				s, err := e.Step(actions)
				if err != nil {
					b.Fatal(err)
				}
				if s.Done() {
					seed++
					if _, err := e.Reset(seed); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
