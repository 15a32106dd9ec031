package replay

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"sync"
)

// Options configure a Table.
type Options struct {
	// Name is the table's name: letters, digits, '_', '-' and '.'.
	Name    string      `msgpack:"name" json:"name"`
	MaxSize int         `msgpack:"max_size" json:"max_size"`
	Sampler SamplerKind `msgpack:"sampler" json:"sampler"`
	Remover RemoverKind `msgpack:"remover" json:"remover"`
	// Alpha is the prioritized sampler's exponent (0: uniform, 1: fully
	// proportional).
	Alpha float64 `msgpack:"alpha" json:"alpha"`
	// Beta is the importance-weight exponent: w_i = (N*P(i))^-beta,
	// divided by the largest weight any item of the table could get.
	Beta float64 `msgpack:"beta" json:"beta"`
	// MaxTimesSampled removes an item once sampled this often (0: never).
	MaxTimesSampled int     `msgpack:"max_times_sampled" json:"max_times_sampled"`
	Limiter         Limiter `msgpack:"limiter" json:"limiter"`
	// Seed seeds the sampler's random numbers.
	Seed uint64 `msgpack:"seed" json:"seed"`
	// FirstID is the id of the first item inserted (ids then count up);
	// a server that starts afresh picks a new one so that ids a learner
	// still holds from before never name new items.
	FirstID uint64 `msgpack:"first_id" json:"first_id"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Validate checks o, naming the field and what is allowed.
func (o Options) Validate() error {
	switch {
	case !nameRE.MatchString(o.Name):
		return fmt.Errorf("%w: name %q: want 1 to 64 letters, digits, dots, dashes or underscores", ErrBadOptions, o.Name)
	case o.MaxSize <= 0 || o.MaxSize > math.MaxInt32:
		return fmt.Errorf("%w: max_size %d: want 1..%d", ErrBadOptions, o.MaxSize, math.MaxInt32)
	case o.Sampler != Uniform && o.Sampler != Prioritized && o.Sampler != FIFO:
		return fmt.Errorf("%w: sampler %q: want uniform, prioritized or fifo", ErrBadOptions, o.Sampler)
	case o.Remover != RemoveFIFO && o.Remover != RemoveLowestPriority:
		return fmt.Errorf("%w: remover %q: want fifo or lowest_priority", ErrBadOptions, o.Remover)
	case !(o.Alpha >= 0) || math.IsInf(o.Alpha, 0):
		return fmt.Errorf("%w: alpha %v: want a finite value >= 0", ErrBadOptions, o.Alpha)
	case !(o.Beta >= 0) || math.IsInf(o.Beta, 0):
		return fmt.Errorf("%w: beta %v: want a finite value >= 0", ErrBadOptions, o.Beta)
	case o.MaxTimesSampled < 0:
		return fmt.Errorf("%w: max_times_sampled %d is negative", ErrBadOptions, o.MaxTimesSampled)
	}
	return o.Limiter.validate()
}

// Sampled is one sampled item.
type Sampled struct {
	ID       uint64  `msgpack:"id"`
	Priority float64 `msgpack:"priority"`
	Data     []byte  `msgpack:"data"`
	// Probability is the chance the draw that picked it had of picking it.
	Probability float64 `msgpack:"probability"`
	// Weight is the importance weight (N*P)^-beta / max_j (N*P_j)^-beta,
	// in (0, 1]; N is the table's size at the draw.
	Weight float64 `msgpack:"weight"`
	// TimesSampled counts this draw.
	TimesSampled int `msgpack:"times_sampled"`
}

// Counters are a table's running totals.
type Counters struct {
	Size    int   `msgpack:"size" json:"size"`
	Inserts int64 `msgpack:"inserts" json:"inserts"`
	// Samples counts sampled items (a Sample(32) counts 32).
	Samples int64 `msgpack:"samples" json:"samples"`
	// Evictions: items the remover took to make room.
	Evictions int64 `msgpack:"evictions" json:"evictions"`
	// Expired: items removed after MaxTimesSampled samples.
	Expired         int64 `msgpack:"expired" json:"expired"`
	PriorityUpdates int64 `msgpack:"priority_updates" json:"priority_updates"`
	// UnknownUpdates: priority updates for ids not in the table (evicted,
	// or never there); ignored.
	UnknownUpdates int64 `msgpack:"unknown_updates" json:"unknown_updates"`
	// RefusedUpdates: priorities refused as NaN, infinite or negative.
	RefusedUpdates int64 `msgpack:"refused_updates" json:"refused_updates"`
	// Waits and timeouts of the blocking Insert and Sample calls.
	InsertWaits    int64 `msgpack:"insert_waits" json:"insert_waits"`
	SampleWaits    int64 `msgpack:"sample_waits" json:"sample_waits"`
	InsertTimeouts int64 `msgpack:"insert_timeouts" json:"insert_timeouts"`
	SampleTimeouts int64 `msgpack:"sample_timeouts" json:"sample_timeouts"`
}

type slot struct {
	id       uint64
	priority float64
	data     []byte
	times    int
	used     bool
}

// Table is a bounded store of prioritized items with a sampler, a remover
// and a rate limiter. It is safe for concurrent use.
type Table struct {
	opts Options

	mu      sync.Mutex
	rng     *rand.Rand
	slots   []slot
	free    []int
	byID    map[uint64]int
	order   *orderList
	smp     sampler
	rem     remover
	nextID  uint64
	c       Counters
	changed chan struct{} // closed and replaced on an insert or sample while waiters > 0
	waiters int
}

// NewTable returns an empty table.
func NewTable(o Options) (*Table, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t := &Table{
		opts:    o,
		rng:     rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15)),
		slots:   make([]slot, o.MaxSize),
		free:    make([]int, o.MaxSize),
		byID:    make(map[uint64]int, min(o.MaxSize, 1<<16)),
		order:   newOrder(o.MaxSize),
		nextID:  o.FirstID,
		changed: make(chan struct{}),
	}
	for i := range t.free {
		t.free[i] = o.MaxSize - 1 - i // pop from the end: slot 0 first
	}
	switch o.Sampler {
	case Uniform:
		t.smp = newUniform(o.MaxSize)
	case Prioritized:
		t.smp = newPrioritized(o.MaxSize, o.Alpha)
	case FIFO:
		t.smp = fifoSampler{t.order}
	}
	switch o.Remover {
	case RemoveFIFO:
		t.rem = fifoRemover{t.order}
	case RemoveLowestPriority:
		t.rem = lowestRemover{NewMinTree(o.MaxSize)}
	}
	return t, nil
}

// Options returns the options the table was made with.
func (t *Table) Options() Options { return t.opts }

// Name is the table's name.
func (t *Table) Name() string { return t.opts.Name }

// Counters returns the table's totals.
func (t *Table) Counters() Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.c
}

func checkPriority(p float64) error {
	if !(p >= 0) || math.IsInf(p, 1) {
		return fmt.Errorf("%w: %v (want finite and >= 0)", ErrBadPriority, p)
	}
	return nil
}

// TryInsert inserts one item if the rate limiter allows it now, evicting
// one if the table is full, and returns its id. A closed limiter is a
// *RateLimitError wrapping ErrWouldBlock.
func (t *Table) TryInsert(priority float64, data []byte) (uint64, error) {
	if err := checkPriority(priority); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok, why := t.opts.Limiter.canInsert(t.c.Size, t.c.Inserts, t.c.Samples); !ok {
		return 0, t.limitErr(SideInsert, why, ErrWouldBlock)
	}
	return t.insertLocked(priority, data), nil
}

// Insert is TryInsert that waits while the limiter is closed, until ctx
// ends; then the error is a *RateLimitError wrapping ctx's error.
func (t *Table) Insert(ctx context.Context, priority float64, data []byte) (uint64, error) {
	if err := checkPriority(priority); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	waited := false
	for {
		ok, why := t.opts.Limiter.canInsert(t.c.Size, t.c.Inserts, t.c.Samples)
		if ok {
			return t.insertLocked(priority, data), nil
		}
		if !waited {
			waited = true
			t.c.InsertWaits++
		}
		if err := t.waitLocked(ctx); err != nil {
			t.c.InsertTimeouts++
			return 0, t.limitErr(SideInsert, why, err)
		}
	}
}

// waitLocked releases t.mu until the table changes or ctx ends.
func (t *Table) waitLocked(ctx context.Context) error {
	ch := t.changed
	t.waiters++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.waiters--
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Table) notifyLocked() {
	if t.waiters == 0 {
		return
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *Table) limitErr(side Side, why string, err error) *RateLimitError {
	return &RateLimitError{Table: t.opts.Name, Blocked: side, Reason: why, Size: t.c.Size,
		Inserts: t.c.Inserts, Samples: t.c.Samples, Err: err}
}

func (t *Table) insertLocked(priority float64, data []byte) uint64 {
	if t.c.Size == t.opts.MaxSize {
		t.removeLocked(t.rem.victim())
		t.c.Evictions++
	}
	id := t.nextID
	t.nextID++
	t.place(id, priority, data, 0)
	t.c.Inserts++
	t.notifyLocked()
	return id
}

// place stores an item in a free slot.
func (t *Table) place(id uint64, priority float64, data []byte, times int) {
	s := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	t.slots[s] = slot{id: id, priority: priority, data: data, times: times, used: true}
	t.byID[id] = s
	t.order.push(s)
	t.smp.set(s, priority)
	t.rem.set(s, priority)
	t.c.Size++
}

func (t *Table) removeLocked(s int) {
	delete(t.byID, t.slots[s].id)
	t.order.remove(s)
	t.smp.remove(s)
	t.rem.remove(s)
	t.slots[s] = slot{}
	t.free = append(t.free, s)
	t.c.Size--
}

// TrySample draws n items (with replacement) if the limiter allows it
// now. A closed limiter is a *RateLimitError wrapping ErrWouldBlock; an n
// the limiter can never allow is ErrBadArgument.
func (t *Table) TrySample(n int) ([]Sampled, error) {
	if err := t.checkBatch(n); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok, why := t.opts.Limiter.canSample(t.c.Size, n, t.c.Inserts, t.c.Samples); !ok {
		return nil, t.limitErr(SideSample, why, ErrWouldBlock)
	}
	return t.sampleLocked(n), nil
}

// Sample is TrySample that waits while the limiter is closed (or the
// table is empty), until ctx ends; then the error is a *RateLimitError
// wrapping ctx's error.
func (t *Table) Sample(ctx context.Context, n int) ([]Sampled, error) {
	if err := t.checkBatch(n); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	waited := false
	for {
		ok, why := t.opts.Limiter.canSample(t.c.Size, n, t.c.Inserts, t.c.Samples)
		if ok {
			return t.sampleLocked(n), nil
		}
		if !waited {
			waited = true
			t.c.SampleWaits++
		}
		if err := t.waitLocked(ctx); err != nil {
			t.c.SampleTimeouts++
			return nil, t.limitErr(SideSample, why, err)
		}
	}
}

func (t *Table) checkBatch(n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: sample of %d items", ErrBadArgument, n)
	}
	if m := t.opts.Limiter.maxBatch(); n > m {
		return fmt.Errorf("%w: sample of %d items: the rate limiter allows at most %d at once (2*error_buffer - samples_per_insert)", ErrBadArgument, n, m)
	}
	return nil
}

// sampleLocked draws n items; the table is not empty. An item that
// reaches MaxTimesSampled leaves the table at once, so a FIFO sampler with
// MaxTimesSampled 1 hands each item out once; the draws after it see the
// smaller table (and stop early if it empties).
func (t *Table) sampleLocked(n int) []Sampled {
	out := make([]Sampled, 0, n)
	for range n {
		if t.c.Size == 0 {
			break
		}
		s, p := t.smp.draw(t.rng)
		it := &t.slots[s]
		it.times++
		w := 1.0
		if t.opts.Beta > 0 {
			// (N*P)^-beta / (N*Pmin)^-beta = (Pmin/P)^beta
			w = math.Pow(t.smp.minProb()/p, t.opts.Beta)
		}
		out = append(out, Sampled{ID: it.id, Priority: it.priority, Data: it.data, Probability: p, Weight: min(w, 1), TimesSampled: it.times})
		if t.opts.MaxTimesSampled > 0 && it.times >= t.opts.MaxTimesSampled {
			t.removeLocked(s)
			t.c.Expired++
		}
	}
	t.c.Samples += int64(len(out))
	t.notifyLocked()
	return out
}

// UpdateResult counts what an UpdatePriorities call did.
type UpdateResult struct {
	Updated int `msgpack:"updated"`
	Unknown int `msgpack:"unknown"`
}

// UpdatePriorities sets the priorities of the items with the given ids.
// Ids not in the table (evicted since they were sampled) are ignored and
// counted. If any priority is NaN, infinite or negative the whole call is
// refused (ErrBadPriority) and counted, and the table is left as it was.
func (t *Table) UpdatePriorities(ids []uint64, priorities []float64) (UpdateResult, error) {
	if len(ids) != len(priorities) {
		return UpdateResult{}, fmt.Errorf("%w: %d ids, %d priorities", ErrBadArgument, len(ids), len(priorities))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, p := range priorities {
		if err := checkPriority(p); err != nil {
			t.c.RefusedUpdates += int64(len(ids))
			return UpdateResult{}, fmt.Errorf("priority %d of %d (id %d): %w", i, len(ids), ids[i], err)
		}
	}
	var r UpdateResult
	for i, id := range ids {
		s, ok := t.byID[id]
		if !ok {
			r.Unknown++
			continue
		}
		t.slots[s].priority = priorities[i]
		t.smp.set(s, priorities[i])
		t.rem.set(s, priorities[i])
		r.Updated++
	}
	t.c.PriorityUpdates += int64(r.Updated)
	t.c.UnknownUpdates += int64(r.Unknown)
	return r, nil
}

// Delete removes the items with the given ids (ids not in the table are
// skipped) and returns how many it removed. A server uses it to replace an
// actor's previous cache.
func (t *Table) Delete(ids []uint64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, id := range ids {
		if s, ok := t.byID[id]; ok {
			t.removeLocked(s)
			n++
		}
	}
	if n > 0 {
		t.notifyLocked() // a smaller table may let inserts below min size through
	}
	return n
}
