package replay

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/stattest"
)

func mustTable(t testing.TB, o Options) *Table {
	t.Helper()
	tb, err := NewTable(o)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// model is the brute-force table: items in insertion order.
type model struct {
	ids   []uint64
	prios map[uint64]float64
}

func (m *model) remove(id uint64) {
	m.ids = slices.DeleteFunc(m.ids, func(x uint64) bool { return x == id })
	delete(m.prios, id)
}

// probs returns the brute-force sampling probability of every item.
func (m *model) probs(o Options) map[uint64]float64 {
	out := map[uint64]float64{}
	switch o.Sampler {
	case Uniform:
		for _, id := range m.ids {
			out[id] = 1 / float64(len(m.ids))
		}
	case FIFO:
		out[m.ids[0]] = 1
	case Prioritized:
		total := 0.0
		for _, id := range m.ids {
			total += math.Pow(m.prios[id], o.Alpha)
		}
		for _, id := range m.ids {
			if total == 0 {
				out[id] = 1 / float64(len(m.ids))
			} else {
				out[id] = math.Pow(m.prios[id], o.Alpha) / total
			}
		}
	}
	return out
}

// Random inserts, updates and samples against the brute-force model:
// the stored items, every sample's probability and weight, and which item
// each remover evicts.
func TestTableAgainstBruteForce(t *testing.T) {
	for _, o := range []Options{
		{Sampler: Uniform, Remover: RemoveFIFO},
		{Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 0.6, Beta: 0.4},
		{Sampler: Prioritized, Remover: RemoveLowestPriority, Alpha: 1, Beta: 1},
		{Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 0.5, Beta: 0.7},
		{Sampler: FIFO, Remover: RemoveLowestPriority},
	} {
		o.Name, o.MaxSize, o.Seed = "t", 40, 7
		t.Run(string(o.Sampler)+"/"+string(o.Remover), func(t *testing.T) {
			tb := mustTable(t, o)
			m := &model{prios: map[uint64]float64{}}
			r := rand.New(rand.NewPCG(5, 6))
			prio := func() float64 {
				if r.IntN(10) == 0 {
					return 0
				}
				return float64(r.IntN(20)) / 4 // ties on purpose
			}
			for step := range 3000 {
				switch op := r.IntN(10); {
				case op < 5: // insert
					p := prio()
					var victim uint64
					full := len(m.ids) == o.MaxSize
					if full {
						victim = bruteVictim(t, m, o.Remover, tb)
					}
					id, err := tb.TryInsert(p, []byte{byte(step)})
					if err != nil {
						t.Fatal(err)
					}
					if full {
						m.remove(victim)
					}
					m.ids = append(m.ids, id)
					m.prios[id] = p
				case op < 7 && len(m.ids) > 0: // update some, one unknown
					ids := []uint64{m.ids[r.IntN(len(m.ids))], m.ids[r.IntN(len(m.ids))], 1 << 60}
					ps := []float64{prio(), prio(), 1}
					res, err := tb.UpdatePriorities(ids, ps)
					if err != nil || res.Unknown != 1 || res.Updated != 2 {
						t.Fatalf("update: %+v %v", res, err)
					}
					m.prios[ids[0]], m.prios[ids[1]] = ps[0], ps[1]
				case len(m.ids) > 0: // sample one and check it
					want := m.probs(o)
					minP := math.Inf(1)
					for _, p := range want {
						if p > 0 {
							minP = min(minP, p)
						}
					}
					s, err := tb.TrySample(1)
					if err != nil {
						t.Fatal(err)
					}
					got := s[0]
					if math.Abs(got.Probability-want[got.ID]) > 1e-9 || want[got.ID] == 0 {
						t.Fatalf("step %d: item %d probability %v, brute %v", step, got.ID, got.Probability, want[got.ID])
					}
					ww := math.Pow(minP/want[got.ID], o.Beta)
					if math.Abs(got.Weight-ww) > 1e-9 || got.Priority != m.prios[got.ID] {
						t.Fatalf("step %d: weight %v priority %v, brute %v %v", step, got.Weight, got.Priority, ww, m.prios[got.ID])
					}
				}
				if c := tb.Counters(); c.Size != len(m.ids) {
					t.Fatalf("step %d: size %d, brute %d", step, c.Size, len(m.ids))
				}
			}
			var ids []uint64
			for _, it := range tb.Snapshot().Items {
				ids = append(ids, it.ID)
				if it.Priority != m.prios[it.ID] {
					t.Fatalf("item %d priority %v, brute %v", it.ID, it.Priority, m.prios[it.ID])
				}
			}
			if !slices.Equal(ids, m.ids) {
				t.Fatalf("items %v, brute %v", ids, m.ids)
			}
		})
	}
}

// bruteVictim is the item the remover must evict; for the lowest
// priority, ties are the table's choice, so it finds the item the table
// lost and checks that it had the lowest priority.
func bruteVictim(t *testing.T, m *model, r RemoverKind, tb *Table) uint64 {
	if r == RemoveFIFO {
		return m.ids[0]
	}
	lowest := math.Inf(1)
	for _, id := range m.ids {
		lowest = min(lowest, m.prios[id])
	}
	// The table evicts the argmin of its MinTree; find which one it is.
	s := tb.rem.victim()
	id := tb.slots[s].id
	if m.prios[id] != lowest {
		t.Fatalf("remover picks item %d of priority %v, lowest is %v", id, m.prios[id], lowest)
	}
	return id
}

// Many draws from a fixed prioritized table: the frequencies fit the
// priorities (chi-square, fixed seed).
func TestPrioritizedFrequencies(t *testing.T) {
	tb := mustTable(t, Options{Name: "t", MaxSize: 64, Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 0.7, Seed: 11})
	m := &model{prios: map[uint64]float64{}}
	for i := range 50 {
		p := float64(i%7) + 0.5
		id, _ := tb.TryInsert(p, nil)
		m.ids, m.prios[id] = append(m.ids, id), p
	}
	want := m.probs(tb.Options())
	counts := map[uint64]int{}
	for range 400 {
		s, err := tb.TrySample(256)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range s {
			counts[it.ID]++
		}
	}
	obs, probs := make([]int, len(m.ids)), make([]float64, len(m.ids))
	for i, id := range m.ids {
		obs[i], probs[i] = counts[id], want[id]
	}
	stat, dof, p, err := stattest.ChiSquare(obs, probs)
	if err != nil {
		t.Fatal(err)
	}
	if p < 0.001 {
		t.Fatalf("chi-square %.1f with %d dof: p = %.2g, the draws do not follow the priorities", stat, dof, p)
	}
}

// A FIFO sampler with MaxTimesSampled 1 is a queue.
func TestFIFOQueue(t *testing.T) {
	tb := mustTable(t, Options{Name: "q", MaxSize: 10, Sampler: FIFO, Remover: RemoveFIFO, MaxTimesSampled: 1})
	for i := range 5 {
		tb.TryInsert(1, []byte{byte(i)})
	}
	s, err := tb.TrySample(3)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := tb.TrySample(3) // two left: the sample stops at the end
	var got []byte
	for _, it := range append(s, s2...) {
		got = append(got, it.Data[0])
	}
	if !slices.Equal(got, []byte{0, 1, 2, 3, 4}) {
		t.Fatalf("queue order %v", got)
	}
	if c := tb.Counters(); c.Size != 0 || c.Expired != 5 || c.Samples != 5 {
		t.Fatalf("counters %+v", c)
	}
}

// Bad priorities refuse the whole call and leave the table intact.
func TestUpdatePrioritiesRefusesBadInput(t *testing.T) {
	tb := mustTable(t, Options{Name: "t", MaxSize: 10, Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 1})
	a, _ := tb.TryInsert(1, nil)
	b, _ := tb.TryInsert(2, nil)
	before := tb.Snapshot()
	for _, tt := range []struct {
		name  string
		ids   []uint64
		prios []float64
		want  error
	}{
		{"nan", []uint64{a, b}, []float64{3, math.NaN()}, ErrBadPriority},
		{"negative", []uint64{a}, []float64{-1}, ErrBadPriority},
		{"inf", []uint64{b}, []float64{math.Inf(1)}, ErrBadPriority},
		{"lengths", []uint64{a, b}, []float64{1}, ErrBadArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tb.UpdatePriorities(tt.ids, tt.prios); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if after := tb.Snapshot(); !slices.Equal(after.Items[0].Data, before.Items[0].Data) ||
				after.Items[0].Priority != 1 || after.Items[1].Priority != 2 {
				t.Fatalf("table changed: %+v", after.Items)
			}
		})
	}
	if c := tb.Counters(); c.RefusedUpdates != 4 || c.PriorityUpdates != 0 {
		t.Fatalf("counters %+v", c)
	}
	if _, err := tb.TryInsert(math.NaN(), nil); !errors.Is(err, ErrBadPriority) {
		t.Fatalf("insert NaN: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Name: "t", MaxSize: 10, Sampler: Uniform, Remover: RemoveFIFO}
	for _, tt := range []struct {
		name string
		edit func(*Options)
	}{
		{"name", func(o *Options) { o.Name = "a/b" }},
		{"empty name", func(o *Options) { o.Name = "" }},
		{"max_size", func(o *Options) { o.MaxSize = 0 }},
		{"sampler", func(o *Options) { o.Sampler = "lifo" }},
		{"remover", func(o *Options) { o.Remover = "random" }},
		{"alpha", func(o *Options) { o.Alpha = math.NaN() }},
		{"beta", func(o *Options) { o.Beta = -1 }},
		{"max_times_sampled", func(o *Options) { o.MaxTimesSampled = -1 }},
		{"min_size", func(o *Options) { o.Limiter.MinSize = -1 }},
		{"samples_per_insert", func(o *Options) { o.Limiter.SamplesPerInsert = math.Inf(1) }},
		{"error_buffer", func(o *Options) { o.Limiter = Limiter{SamplesPerInsert: 4, ErrorBuffer: 2} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			if _, err := NewTable(o); !errors.Is(err, ErrBadOptions) {
				t.Fatalf("got %v, want ErrBadOptions", err)
			}
		})
	}
	if _, err := NewTable(ok); err != nil {
		t.Fatal(err)
	}
}

// Sample before min size waits, then fails at its deadline with the typed
// error naming the starved side.
func TestSampleBeforeMinSizeTimesOut(t *testing.T) {
	tb := mustTable(t, Options{Name: "t", MaxSize: 10, Sampler: Uniform, Remover: RemoveFIFO, Limiter: Limiter{MinSize: 3}})
	tb.TryInsert(1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20e6)
	defer cancel()
	_, err := tb.Sample(ctx, 1)
	var rl *RateLimitError
	if !errors.As(err, &rl) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a RateLimitError at the deadline", err)
	}
	if rl.Blocked != SideSample || rl.Starved() != "inserts" || rl.Size != 1 {
		t.Fatalf("error %+v", rl)
	}
	if _, err := tb.TrySample(1); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("TrySample: %v", err)
	}
	if c := tb.Counters(); c.SampleWaits != 1 || c.SampleTimeouts != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestDelete(t *testing.T) {
	tb := mustTable(t, Options{Name: "t", MaxSize: 10, Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 1})
	a, _ := tb.TryInsert(1, []byte("a"))
	b, _ := tb.TryInsert(5, []byte("b"))
	if n := tb.Delete([]uint64{b, 12345}); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	for range 20 {
		s, _ := tb.TrySample(1)
		if s[0].ID != a || s[0].Probability != 1 {
			t.Fatalf("sampled %+v after delete", s[0])
		}
	}
}
