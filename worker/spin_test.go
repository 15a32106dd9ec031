package worker_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/worker"
)

// memBell is a bell whose pending input is also in memory
// (worker.MemoryWaiter), as a shared-memory channel's is: InputReady sees
// it without arming anything, PrepareWait sees it too. A detached one has
// no peer in memory: its input comes over the doorbell only.
type memBell struct {
	*bell
	detached bool         // no peer in memory: InputReady says so
	looked   atomic.Int64 // InputReady calls
}

var _ worker.MemoryWaiter = (*memBell)(nil)

func (m *memBell) InputReady() (ready, peers bool) {
	m.looked.Add(1)
	if m.detached {
		return false, false
	}
	return m.pending.Load() > 0, true
}

// startMemBells is startBellsAs with memBells, detached or not, and returns
// the one in the middle.
func startMemBells(t *testing.T, n int, spin time.Duration, detached bool) (nameresolve.Repository, []string, *memBell) {
	t.Helper()
	var mems []*memBell
	repo, names, bells := startBellsAs(t, n, worker.Options{IdleWait: 10 * time.Second, SpinWait: spin},
		func(b *bell) worker.Impl {
			m := &memBell{bell: b, detached: detached}
			mems = append(mems, m)
			return m
		})
	for _, m := range mems {
		if m.bell == bells[n/2] {
			return repo, names, m
		}
	}
	t.Fatal("no memBell in the middle")
	return nil, nil, nil
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
			repo, names, m := startMemBells(t, c.workers, c.spin, false)
			i := c.workers / 2
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

// A loop whose MemoryWaiters have no peer in memory (an actor whose policy
// workers are all on other nodes) does not look: each wait asks once and
// sleeps.
func TestLoopDoesNotLookWithoutPeersInMemory(t *testing.T) {
	const burst = 40
	repo, names, m := startMemBells(t, 1, 50*time.Millisecond, true)
	startAll(t, repo, names, nil)
	eventually.True(t, 5*time.Second, "the loop prepares to sleep", func() bool { return m.prepared.Load() > 0 })
	looked, prepared := m.looked.Load(), m.prepared.Load()
	m.pending.Store(burst)
	m.ring(t)
	eventually.True(t, 10*time.Second, "the burst is taken", func() bool { return m.pending.Load() == 0 })
	time.Sleep(50 * time.Millisecond) // the wait after the burst
	looks, prepares := m.looked.Load()-looked, m.prepared.Load()-prepared
	t.Logf("%d inputs: %d PrepareWait, %d looks", burst, prepares, looks)
	if looks > prepares+1 {
		t.Fatalf("%d looks in memory for %d waits, with no peer there", looks, prepares)
	}
}

// Input over a socket or a doorbell ends a look within a few yields: a
// loop that looks for up to its whole wait (SpinWait far above the sweep)
// still answers a message pushed to its worker's socket at once, where a
// look to the end would take until the next sweep.
func TestLookEndsOnSocketInput(t *testing.T) {
	const sweep = worker.DefaultIdleWait
	repo, names, m := startMemBells(t, 1, time.Hour, false)
	panel := workertest.Panel(t, repo, testTrial)
	push := pullFrom(t, panel, names[0], map[string]any{"pull_addr": "inproc://membell-look"})
	eventually.True(t, 5*time.Second, "the loop looks", func() bool { return m.looked.Load() > 0 })
	const rounds = 10
	prompt := 0
	for round := range rounds {
		for len(m.polled) > 0 {
			<-m.polled
		}
		m.nextPoll(t) // a sweep's: the loop looks until the next one, 100 ms away
		sent := time.Now()
		if _, err := push.Send(fmt.Sprint("work ", round), 0); err != nil {
			t.Fatal(err)
		}
		latency := m.nextPoll(t).Sub(sent)
		t.Logf("round %d: polled %v after the message", round, latency)
		if latency < sweep/2 {
			prompt++
		}
	}
	if prompt == 0 {
		t.Fatalf("no poll in %d rounds came within %v of the message: the look does not end on socket input", rounds, sweep/2)
	}
	if n := m.received.Load(); n != rounds {
		t.Fatalf("%d of %d messages received", n, rounds)
	}
}
