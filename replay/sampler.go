package replay

import (
	"math"
	"math/rand/v2"
)

// SamplerKind selects how a table picks the items it samples.
type SamplerKind string

// Samplers.
const (
	// Uniform: every item equally likely, P(i) = 1/N.
	Uniform SamplerKind = "uniform"
	// Prioritized: proportional prioritized sampling (Schaul et al. 2016),
	// P(i) = p_i^alpha / sum_j p_j^alpha, on a SumTree. With every priority
	// zero it samples uniformly.
	Prioritized SamplerKind = "prioritized"
	// FIFO: the oldest item, P = 1. With MaxTimesSampled 1 the table is a
	// queue.
	FIFO SamplerKind = "fifo"
)

// RemoverKind selects which item a full table evicts for a new one.
type RemoverKind string

// Removers.
const (
	// RemoveFIFO evicts the oldest item.
	RemoveFIFO RemoverKind = "fifo"
	// RemoveLowestPriority evicts an item of the lowest priority.
	RemoveLowestPriority RemoverKind = "lowest_priority"
)

// sampler draws slots. Slots are table storage indices in [0, MaxSize).
type sampler interface {
	set(slot int, priority float64)
	remove(slot int)
	// draw returns a slot and its probability; the table is not empty.
	draw(r *rand.Rand) (int, float64)
	// minProb is the smallest probability of a drawable item: the largest
	// importance weight is (N * minProb)^-beta.
	minProb() float64
}

// uniformSampler keeps the occupied slots dense for O(1) draws.
type uniformSampler struct {
	keys []int
	pos  []int // slot -> index in keys, -1 when absent
}

func newUniform(n int) *uniformSampler {
	pos := make([]int, n)
	for i := range pos {
		pos[i] = -1
	}
	return &uniformSampler{pos: pos}
}

func (u *uniformSampler) set(slot int, _ float64) {
	if u.pos[slot] >= 0 {
		return
	}
	u.pos[slot] = len(u.keys)
	u.keys = append(u.keys, slot)
}

func (u *uniformSampler) remove(slot int) {
	i := u.pos[slot]
	if i < 0 {
		return
	}
	last := u.keys[len(u.keys)-1]
	u.keys[i] = last
	u.pos[last] = i
	u.keys = u.keys[:len(u.keys)-1]
	u.pos[slot] = -1
}

func (u *uniformSampler) draw(r *rand.Rand) (int, float64) {
	return u.keys[r.IntN(len(u.keys))], 1 / float64(len(u.keys))
}

func (u *uniformSampler) minProb() float64 { return 1 / float64(max(len(u.keys), 1)) }

// prioritizedSampler: p^alpha in a SumTree for draws and in a MinTree for
// the smallest probability (zero priorities, never drawn, left out).
type prioritizedSampler struct {
	alpha float64
	sum   *SumTree
	mn    *MinTree
	all   *uniformSampler // the fallback when every priority is zero
}

func newPrioritized(n int, alpha float64) *prioritizedSampler {
	return &prioritizedSampler{alpha: alpha, sum: NewSumTree(n), mn: NewMinTree(n), all: newUniform(n)}
}

func (p *prioritizedSampler) set(slot int, priority float64) {
	pa := math.Pow(priority, p.alpha)
	p.sum.Set(slot, pa)
	if pa > 0 {
		p.mn.Set(slot, pa)
	} else {
		p.mn.Set(slot, math.Inf(1))
	}
	p.all.set(slot, priority)
}

func (p *prioritizedSampler) remove(slot int) {
	p.sum.Set(slot, 0)
	p.mn.Set(slot, math.Inf(1))
	p.all.remove(slot)
}

func (p *prioritizedSampler) draw(r *rand.Rand) (int, float64) {
	total := p.sum.Total()
	if total <= 0 {
		return p.all.draw(r)
	}
	i := p.sum.Find(r.Float64() * total)
	return i, p.sum.Get(i) / total
}

func (p *prioritizedSampler) minProb() float64 {
	total := p.sum.Total()
	if total <= 0 {
		return p.all.minProb()
	}
	return p.mn.Min() / total
}

// orderList is the insertion order of the occupied slots, a doubly linked
// list over slot indices: O(1) append and removal anywhere.
type orderList struct {
	prev, next []int32
	head, tail int32
}

func newOrder(n int) *orderList {
	o := &orderList{prev: make([]int32, n), next: make([]int32, n), head: -1, tail: -1}
	return o
}

func (o *orderList) push(slot int) {
	s := int32(slot)
	o.prev[s], o.next[s] = o.tail, -1
	if o.tail >= 0 {
		o.next[o.tail] = s
	} else {
		o.head = s
	}
	o.tail = s
}

func (o *orderList) remove(slot int) {
	s := int32(slot)
	p, n := o.prev[s], o.next[s]
	if p >= 0 {
		o.next[p] = n
	} else {
		o.head = n
	}
	if n >= 0 {
		o.prev[n] = p
	} else {
		o.tail = p
	}
}

// fifoSampler draws the oldest slot.
type fifoSampler struct{ order *orderList }

func (fifoSampler) set(int, float64)                 {}
func (fifoSampler) remove(int)                       {}
func (f fifoSampler) draw(*rand.Rand) (int, float64) { return int(f.order.head), 1 }
func (fifoSampler) minProb() float64                 { return 1 }

// remover picks the slot a full table evicts.
type remover interface {
	set(slot int, priority float64)
	remove(slot int)
	victim() int
}

type fifoRemover struct{ order *orderList }

func (fifoRemover) set(int, float64) {}
func (fifoRemover) remove(int)       {}
func (f fifoRemover) victim() int    { return int(f.order.head) }

type lowestRemover struct{ mn *MinTree }

func (l lowestRemover) set(slot int, priority float64) { l.mn.Set(slot, priority) }
func (l lowestRemover) remove(slot int)                { l.mn.Set(slot, math.Inf(1)) }
func (l lowestRemover) victim() int                    { return l.mn.ArgMin() }
