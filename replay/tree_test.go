package replay

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The sum tree against a linear prefix scan: random values (some zero),
// random updates, every Find of a random u and of the edges.
func TestSumTreeAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 64, 100, 1000} {
		s := NewSumTree(n)
		vals := make([]float64, n)
		for round := range 2000 {
			i := r.IntN(n)
			v := r.Float64() * 10
			if r.IntN(4) == 0 {
				v = 0
			}
			s.Set(i, v)
			vals[i] = v
			total := 0.0
			for _, x := range vals {
				total += x
			}
			if math.Abs(s.Total()-total) > 1e-9*max(1, total) {
				t.Fatalf("n=%d round %d: total %v, brute %v", n, round, s.Total(), total)
			}
			if total == 0 {
				continue
			}
			for _, u := range []float64{0, r.Float64() * total, math.Nextafter(total, 0)} {
				got := s.Find(u)
				want := bruteFind(vals, u)
				if got != want && !(vals[got] > 0 && near(vals, got, want, u)) {
					t.Fatalf("n=%d round %d: Find(%v) = %d, brute %d (vals %v)", n, round, u, got, want, vals)
				}
				if vals[got] == 0 {
					t.Fatalf("n=%d: Find(%v) = %d, a zero value", n, u, got)
				}
			}
		}
	}
}

// bruteFind is the first index whose cumulative sum exceeds u; past the
// end (rounding) the last positive value.
func bruteFind(vals []float64, u float64) int {
	c, last := 0.0, -1
	for i, v := range vals {
		if v > 0 {
			last = i
		}
		c += v
		if u < c && v > 0 {
			return i
		}
	}
	return last
}

// near accepts a disagreement caused only by rounding: u within 1e-9 of
// the boundary between the two indices.
func near(vals []float64, got, want int, u float64) bool {
	lo, hi := min(got, want), max(got, want)
	c := 0.0
	for i := range hi {
		c += vals[i]
		if i >= lo && math.Abs(c-u) < 1e-9 {
			return true
		}
	}
	return false
}

func TestMinTreeAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 64, 300} {
		m := NewMinTree(n)
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = math.Inf(1)
		}
		if m.ArgMin() != -1 {
			t.Fatalf("empty tree: ArgMin %d", m.ArgMin())
		}
		for round := range 3000 {
			i := r.IntN(n)
			v := float64(r.IntN(50)) // ties on purpose
			if r.IntN(5) == 0 {
				v = math.Inf(1)
			}
			m.Set(i, v)
			vals[i] = v
			want := math.Inf(1)
			for _, x := range vals {
				want = min(want, x)
			}
			if m.Min() != want {
				t.Fatalf("n=%d round %d: Min %v, brute %v", n, round, m.Min(), want)
			}
			a := m.ArgMin()
			if math.IsInf(want, 1) {
				if a != -1 {
					t.Fatalf("all unset: ArgMin %d", a)
				}
				continue
			}
			if a < 0 || vals[a] != want {
				t.Fatalf("n=%d round %d: ArgMin %d (value %v), min %v", n, round, a, vals[a], want)
			}
		}
	}
}
