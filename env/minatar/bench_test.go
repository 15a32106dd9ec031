package minatar

import "testing"

// BenchmarkStep measures steps per second of each game under a random
// policy, with resets as episodes end.
func BenchmarkStep(b *testing.B) {
	for _, name := range Games() {
		b.Run(name, func(b *testing.B) {
			w := newRandomWalk(b, newEnv(b, name, DefaultOptions()), 5)
			b.ReportAllocs()
			for b.Loop() {
				w.step()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
