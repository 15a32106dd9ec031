package duty

import "time"

// Meter is the share of the last span of wall time that a busy time grew.
// The caller keeps the busy time as a running total (work still running
// may be counted up to now) and samples it as it goes; Share divides the
// total's growth since the oldest sample within the span by the time
// since that sample. It suits work measured when it ends, on another
// goroutine, where a Window would need the intervals in order. The zero
// value is not usable; call NewMeter. Not safe for concurrent use.
type Meter struct {
	every time.Duration // the least time between two samples kept
	at    []time.Time
	total []time.Duration
	next  int // where the next sample goes
	n     int // samples held
}

// NewMeter makes a meter of the last span, keeping a sample per span/n
// (n at least 1): the share covers between span - span/n and span.
func NewMeter(span time.Duration, n int) *Meter {
	n = max(n, 1)
	return &Meter{every: max(span/time.Duration(n), 1), at: make([]time.Time, n+1), total: make([]time.Duration, n+1)}
}

// Sample records the total at now, unless the newest sample is more
// recent than span/n. Totals must not decrease.
func (m *Meter) Sample(now time.Time, total time.Duration) {
	if m.n > 0 && now.Sub(m.at[m.newest()]) < m.every {
		return
	}
	m.at[m.next], m.total[m.next] = now, total
	m.next = (m.next + 1) % len(m.at)
	m.n = min(m.n+1, len(m.at))
}

// Share is the growth of the total from the oldest sample within the span
// to total at now, over the time between them, clipped to [0, 1], and that
// time; 0, 0 before a sample within the span.
func (m *Meter) Share(now time.Time, total time.Duration) (share float64, over time.Duration) {
	span := m.every * time.Duration(len(m.at)-1)
	for k := m.n; k > 0; k-- { // oldest first
		i := (m.next - k + len(m.at)) % len(m.at)
		over = now.Sub(m.at[i])
		if over > span {
			continue
		}
		if over <= 0 {
			return 0, 0
		}
		return min(max(float64(total-m.total[i])/float64(over), 0), 1), over
	}
	return 0, 0
}

func (m *Meter) newest() int { return (m.next - 1 + len(m.at)) % len(m.at) }
