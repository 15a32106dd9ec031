package benchutil

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is the CPU time (user and system) this process has used, all of
// its threads together: the Go runtime's and those of C libraries such as
// libzmq's I/O threads, which a Go CPU profile does not see.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUMeter reports the process's CPU time per unit of work over a
// benchmark's timed loop. On a shared machine it is steadier than the wall
// clock, which other processes' load stretches: it measures what the code
// costs rather than how long it waited for a core.
type CPUMeter struct{ start time.Duration }

// Start begins the measurement (call it with the timer).
func (m *CPUMeter) Start() { m.start = CPUTime() }

// Report reports the CPU time since Start per unit of n units, in
// nanoseconds, as the metric "cpu-ns/"+unit.
func (m *CPUMeter) Report(b *testing.B, n int, unit string) {
	if n <= 0 {
		return
	}
	b.ReportMetric(float64(CPUTime()-m.start)/float64(n), "cpu-ns/"+unit)
}
