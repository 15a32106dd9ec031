package benchutil

import (
	"slices"
	"testing"
	"time"
)

// Latencies collects the duration of each operation of a benchmark.
type Latencies struct {
	samples []time.Duration
	begin   time.Time
}

// Start resets the recorder; call it right before the timed loop.
func (l *Latencies) Start(n int) {
	l.samples = make([]time.Duration, 0, n)
	l.begin = time.Now()
}

// Record adds the duration of one operation.
func (l *Latencies) Record(d time.Duration) { l.samples = append(l.samples, d) }

// Time runs op and records how long it took.
func (l *Latencies) Time(op func()) {
	t := time.Now()
	op()
	l.Record(time.Since(t))
}

// Percentile returns the p-th percentile (0 < p <= 100) of the samples.
func (l *Latencies) Percentile(p float64) time.Duration {
	if len(l.samples) == 0 {
		return 0
	}
	s := slices.Clone(l.samples)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Report adds p50 and p99 in unit ("us" or "ms") and ops/s to b's metrics.
func (l *Latencies) Report(b *testing.B, unit string) {
	l.ReportRate(b, unit, len(l.samples), "ops/s")
}

// ReportRate is Report for a benchmark whose timed operation is a batch:
// the rate is ops operations since Start, reported in rateUnit.
func (l *Latencies) ReportRate(b *testing.B, unit string, ops int, rateUnit string) {
	div := float64(time.Microsecond)
	if unit == "ms" {
		div = float64(time.Millisecond)
	}
	b.ReportMetric(float64(l.Percentile(50))/div, "p50-"+unit)
	b.ReportMetric(float64(l.Percentile(99))/div, "p99-"+unit)
	if el := time.Since(l.begin).Seconds(); el > 0 {
		b.ReportMetric(float64(ops)/el, rateUnit)
	}
}
