package replay

import "math"

// SumTree holds n non-negative values and answers prefix-sum searches in
// O(log n): the structure behind proportional prioritized sampling. Every
// inner node is recomputed as the sum of its children on each Set, so
// rounding errors never accumulate over millions of updates.
type SumTree struct {
	n    int
	base int       // number of leaves, a power of two >= n
	t    []float64 // t[1] is the root; leaf i is t[base+i]
}

// NewSumTree returns a tree of n zero values.
func NewSumTree(n int) *SumTree {
	base := 1
	for base < n {
		base <<= 1
	}
	return &SumTree{n: n, base: base, t: make([]float64, 2*base)}
}

// Len is the number of values.
func (s *SumTree) Len() int { return s.n }

// Set sets value i to v (v >= 0).
func (s *SumTree) Set(i int, v float64) {
	k := s.base + i
	s.t[k] = v
	for k >>= 1; k > 0; k >>= 1 {
		s.t[k] = s.t[2*k] + s.t[2*k+1]
	}
}

// Get returns value i.
func (s *SumTree) Get(i int) float64 { return s.t[s.base+i] }

// Total is the sum of all values.
func (s *SumTree) Total() float64 { return s.t[1] }

// Find returns the index i whose interval [prefix(i), prefix(i)+v_i)
// holds u, for 0 <= u < Total(). It never returns an index whose value is
// zero while the total is positive: a u that rounding puts at the end of
// the range lands on the last positive value.
func (s *SumTree) Find(u float64) int {
	k := 1
	for k < s.base {
		l := s.t[2*k]
		if u < l || s.t[2*k+1] == 0 {
			k = 2 * k
		} else {
			u -= l
			k = 2*k + 1
		}
	}
	return k - s.base
}

// MinTree holds n values (+Inf when unset) and answers the minimum and
// where it is in O(1) and O(log n): lowest-priority eviction, and the
// smallest sampling probability behind importance weights.
type MinTree struct {
	base int
	t    []float64
}

// NewMinTree returns a tree of n unset (+Inf) values.
func NewMinTree(n int) *MinTree {
	base := 1
	for base < n {
		base <<= 1
	}
	t := make([]float64, 2*base)
	for i := range t {
		t[i] = math.Inf(1)
	}
	return &MinTree{base: base, t: t}
}

// Set sets value i to v; +Inf unsets it.
func (m *MinTree) Set(i int, v float64) {
	k := m.base + i
	m.t[k] = v
	for k >>= 1; k > 0; k >>= 1 {
		m.t[k] = min(m.t[2*k], m.t[2*k+1])
	}
}

// Min is the smallest value (+Inf when none is set).
func (m *MinTree) Min() float64 { return m.t[1] }

// ArgMin returns an index holding the smallest value; -1 when none is set.
func (m *MinTree) ArgMin() int {
	if math.IsInf(m.t[1], 1) {
		return -1
	}
	k := 1
	for k < m.base {
		if m.t[2*k] == m.t[k] {
			k = 2 * k
		} else {
			k = 2*k + 1
		}
	}
	return k - m.base
}
