package worker

import (
	"time"

	"golang.org/x/sys/unix"
)

// spinner decides how long a loop looks for input in shared memory before
// it sleeps, and looks.
//
// Why: waking a sleeping thread costs the waker a system call and, where
// the sleeper's CPU idles, an inter-processor interrupt; on the virtual
// machines this was measured on that is about 7 us of the waker's CPU and
// 11-14 us before the sleeper runs, each way. An actor with 8 environments
// waits some 50 us for each reply, so the two wake-ups of a round trip were
// a large part of it. A loop that keeps looking finds the reply in memory
// and the policy worker, seeing nobody asleep, rings no doorbell.
//
// Looking costs the CPU it runs on, so it yields between looks (any other
// runnable thread on that CPU goes first) and is bounded: at most max, and
// only while the recent waits were shorter than max on average. A loop
// whose input comes rarely or late (an actor of 256 environments waits
// most of a millisecond for its batch; an idle worker waits for commands)
// measures long waits and goes straight to sleep.
type spinner struct {
	max time.Duration // Options.SpinWait; <= 0: never look
	// avg is a moving average of the recent waits' lengths (1/8 weight to
	// the newest), each counted up to spinWaitCap times max so that one
	// idle spell is forgotten after about a dozen short waits.
	avg time.Duration
}

// spinWaitCap bounds a wait's weight in the average, in units of max.
const spinWaitCap = 4

// budget is how long to look before this wait: max while the average wait
// is shorter, else nothing.
func (s *spinner) budget() time.Duration {
	if s.max <= 0 || s.avg >= s.max {
		return 0
	}
	return s.max
}

// note adds a wait of length d (looking and sleeping) to the average.
func (s *spinner) note(d time.Duration) {
	d = min(d, spinWaitCap*s.max)
	s.avg += (d - s.avg) / 8
}

// look calls ready with the number of the call (from 1) until it reports
// input or budget has passed since began, yielding the CPU between calls;
// true when input came.
func (s *spinner) look(began time.Time, budget time.Duration, ready func(turn int) bool) bool {
	for turn := 1; ; turn++ {
		if ready(turn) {
			return true
		}
		if time.Since(began) >= budget {
			return false
		}
		// sched_yield(2) returns at once when nothing else wants this CPU.
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}
