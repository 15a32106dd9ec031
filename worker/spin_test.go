package worker_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/worker"
)

// memBell is a bell whose pending input is also in memory
// (worker.MemoryWaiter), as a shared-memory channel's is: InputReady sees
// it without arming anything, PrepareWait sees it too.
type memBell struct {
	*bell
	looked atomic.Int64 // InputReady calls
}

var _ worker.MemoryWaiter = (*memBell)(nil)

func (m *memBell) InputReady() bool {
	m.looked.Add(1)
	return m.pending.Load() > 0
}

// A loop whose waits are short looks for input in memory before it sleeps
// and finds it there: the worker is polled without PrepareWait, so its
// peers would not be asked to ring. A burst of input taken one per Poll
// makes every wait short; after an idle spell (when the loop does not look)
// the first waits of the burst still go through PrepareWait (the average
// remembers the long waits), then the loop looks. With SpinWait negative it
// never looks.
//
// SpinWait is 50 ms so that the looks do not depend on the machine's speed:
// the input is there at the first look, and an idle wait (the 100 ms sweep)
// is still longer than SpinWait, so that the idle loop does not look.
func TestLoopLooksInMemoryBeforeSleeping(t *testing.T) {
	const burst = 40
	for _, c := range []struct {
		name    string
		workers int
		spin    time.Duration
		looks   bool
	}{
		{"Run", 1, 50 * time.Millisecond, true},
		{"RunMany", 3, 50 * time.Millisecond, true},
		{"Run/never", 1, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mems []*memBell
			repo, names, bells := startBellsAs(t, c.workers, worker.Options{IdleWait: 10 * time.Second, SpinWait: c.spin},
				func(b *bell) worker.Impl {
					m := &memBell{bell: b}
					mems = append(mems, m)
					return m
				})
			i := c.workers / 2
			var m *memBell
			for _, mb := range mems {
				if mb.bell == bells[i] {
					m = mb
				}
			}
			startAll(t, repo, names, nil)
			eventually.True(t, 5*time.Second, "the loop prepares to sleep", func() bool { return m.prepared.Load() > 0 })
			// Idle: the loop sleeps, its waits are long (the 100 ms
			// sweep), and it does not look.
			looked := m.looked.Load()
			time.Sleep(300 * time.Millisecond)
			if n := m.looked.Load() - looked; n != 0 {
				t.Fatalf("the idle loop looked in memory %d times in 300 ms", n)
			}
			prepared, polls := m.prepared.Load(), m.polls.Load()
			m.pending.Store(burst)
			m.ring(t) // wakes the sleeping loop; from then on input is always there
			eventually.True(t, 10*time.Second, "the burst is taken", func() bool { return m.pending.Load() == 0 })
			prepares := m.prepared.Load() - prepared
			t.Logf("%d inputs in %d polls, %d PrepareWait, %d looks", burst, m.polls.Load()-polls, prepares, m.looked.Load())
			if !c.looks {
				if n := m.looked.Load(); n != 0 {
					t.Fatalf("SpinWait %v: InputReady called %d times", c.spin, n)
				}
				if prepares < burst-1 {
					t.Fatalf("SpinWait %v: %d PrepareWait for %d inputs taken one per poll", c.spin, prepares, burst)
				}
				return
			}
			// The moving average (1/8 to the newest wait) falls from four
			// times SpinWait to under it after eleven short waits;
			// whatever the machine, most of the burst must be found by
			// looking, and the first waits not.
			if prepares > burst/2 || prepares == 0 {
				t.Fatalf("%d of %d inputs went through PrepareWait: the loop did not look in memory", prepares, burst)
			}
			var stats struct {
				Spun int64 `msgpack:"spun_waits"`
			}
			panel := workertest.Panel(t, repo, testTrial)
			if err := panel.Request(ctxT(t), names[i], "stats", nil, &stats); err != nil {
				t.Fatal(err)
			}
			if stats.Spun < burst/2 {
				t.Fatalf("stats spun_waits = %d after a burst of %d", stats.Spun, burst)
			}
		})
	}
}
