package replay

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

const benchItems = 1 << 20

var (
	benchOnce  sync.Once
	benchTable *Table
)

// fullTable is a prioritized table of 1M items (100-byte payloads),
// built once for every benchmark.
func fullTable(b *testing.B) *Table {
	benchOnce.Do(func() {
		benchTable = mustTable(b, Options{Name: "bench", MaxSize: benchItems, Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 0.6, Beta: 0.4})
		data := make([]byte, 100)
		r := rand.New(rand.NewPCG(1, 1))
		for range benchItems {
			benchTable.TryInsert(r.Float64()*10, data)
		}
	})
	return benchTable
}

func reportItems(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "items/s")
}

// Inserts into a full table of 1M items: each evicts the oldest.
func BenchmarkTableInsert(b *testing.B) {
	tb := fullTable(b)
	data := make([]byte, 100)
	b.ResetTimer()
	for i := range b.N {
		tb.TryInsert(float64(i%97)/10, data)
	}
	reportItems(b, 1)
}

func BenchmarkTableSample(b *testing.B) {
	for _, n := range []int{32, 256} {
		b.Run("batch="+strconv.Itoa(n), func(b *testing.B) {
			tb := fullTable(b)
			b.ResetTimer()
			for range b.N {
				if _, err := tb.TrySample(n); err != nil {
					b.Fatal(err)
				}
			}
			reportItems(b, n)
		})
	}
}

// A learner's priority update of a batch of 256 sampled ids.
func BenchmarkTableUpdatePriorities(b *testing.B) {
	tb := fullTable(b)
	s, _ := tb.TrySample(256)
	ids := make([]uint64, len(s))
	prios := make([]float64, len(s))
	for i := range s {
		ids[i], prios[i] = s[i].ID, float64(i)
	}
	b.ResetTimer()
	for range b.N {
		tb.UpdatePriorities(ids, prios)
	}
	reportItems(b, len(ids))
}

// The bare sum-tree operations a table's insert and draw are built on:
// the limits the table benchmarks are held against.
func BenchmarkSumTreeSet(b *testing.B) {
	s := NewSumTree(benchItems)
	b.ResetTimer()
	for i := range b.N {
		s.Set(i&(benchItems-1), float64(i%97))
	}
	reportItems(b, 1)
}

func BenchmarkSumTreeFind(b *testing.B) {
	s := NewSumTree(benchItems)
	for i := range benchItems {
		s.Set(i, float64(i%97)+1)
	}
	r := rand.New(rand.NewPCG(2, 2))
	total := s.Total()
	b.ResetTimer()
	for range b.N {
		s.Find(r.Float64() * total)
	}
	reportItems(b, 1)
}
