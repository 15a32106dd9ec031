package localreplay

import (
	"fmt"
	"math"
	"sort"
)

// Item is a transition leaving the memory, with its key (unique within
// this memory, for priority updates) and priority.
type Item struct {
	Key        uint64     `msgpack:"key"`
	Priority   float32    `msgpack:"priority"`
	Transition Transition `msgpack:"transition"`
	// Probability is the local draw's probability p^alpha / Sum (SampleCache).
	Probability float64 `msgpack:"probability"`
}

// TakeNew returns the transitions of the episodes closed since the last
// call (those still held) with their initial priorities: the Ape-X path,
// where actors insert into the replay directly.
func (m *Memory) TakeNew() []Item {
	var out []Item
	for _, e := range m.newest {
		for t := range e.trans {
			out = append(out, Item{Key: e.key + uint64(t), Priority: e.trans[t].Priority, Transition: m.transition(e, t)})
		}
	}
	m.newest = m.newest[:0]
	return out
}

// Cache is the first phase of two-phase sampling: n transitions drawn from
// the memory with probability p^alpha / Sum, with replacement.
type Cache struct {
	// Sum is S_k = sum of p^alpha over the memory's transitions at the
	// draw, Size their number.
	Sum   float64 `msgpack:"sum"`
	Size  int     `msgpack:"size"`
	Items []Item  `msgpack:"items"`
}

// ServerPriority is the priority each of the cache's items gets in the
// server's table (sampled with alpha 1), so that the two phases together
// sample the union of the actors' memories: see the package doc.
func (c Cache) ServerPriority() float64 {
	if len(c.Items) == 0 {
		return 0
	}
	return c.Sum / float64(len(c.Items))
}

// SampleCache draws n transitions for the server (phase one). An empty
// memory gives an empty cache.
func (m *Memory) SampleCache(n int) (Cache, error) {
	if n < 0 {
		return Cache{}, fmt.Errorf("%w: cache of %d", ErrBadStep, n)
	}
	c := Cache{Sum: m.tree.Total(), Size: m.ringUsed}
	if m.ringUsed == 0 || c.Sum <= 0 {
		return c, nil
	}
	c.Items = make([]Item, 0, n)
	for range n {
		s := m.tree.Find(m.rng.Float64() * c.Sum)
		ref := m.owner[s]
		c.Items = append(c.Items, Item{
			Key: ref.ep.key + uint64(ref.t), Priority: ref.ep.trans[ref.t].Priority,
			Transition: m.transition(ref.ep, ref.t), Probability: m.tree.Get(s) / c.Sum,
		})
	}
	return c, nil
}

// UpdatePriorities sets the local priorities of transitions by key (the
// learner's |TD error| flowing back). Keys no longer held are ignored;
// it returns how many were updated. Priorities must be finite and >= 0.
func (m *Memory) UpdatePriorities(keys []uint64, priorities []float32) (int, error) {
	if len(keys) != len(priorities) {
		return 0, fmt.Errorf("%w: %d keys, %d priorities", ErrBadStep, len(keys), len(priorities))
	}
	for _, p := range priorities {
		if !(p >= 0) || math.IsInf(float64(p), 1) {
			return 0, fmt.Errorf("%w: priority %v", ErrBadStep, p)
		}
	}
	n := 0
	for i, k := range keys {
		j := sort.Search(len(m.closed), func(j int) bool { return m.closed[j].key+uint64(len(m.closed[j].trans)) > k })
		if j == len(m.closed) || k < m.closed[j].key {
			continue
		}
		e, t := m.closed[j], int(k-m.closed[j].key)
		p := priorities[i] + float32(m.cfg.PriorityEps)
		e.trans[t].Priority = p
		m.tree.Set((e.first+t)%m.cfg.MaxTransitions, math.Pow(float64(p), m.cfg.Alpha))
		n++
	}
	return n, nil
}
