package trainerworker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker/member"
)

// overlapStats are the figures of an overlapping trainer the test reads.
type overlapStats struct {
	Overlap  bool    `msgpack:"overlap"`
	Updating bool    `msgpack:"updating"`
	Polls    int64   `msgpack:"polls"`
	LagP99   float64 `msgpack:"policy_lag_p99"`
}

// TestOverlap holds each update at a gate and looks at what the trainer
// does meanwhile: overlapping, it answers, takes the next update's batches
// in (counting them a version staler), then leaves the rest queued and
// sleeps instead of polling a socket it cannot take from; in turn, it
// takes nothing until the update is done.
func TestOverlap(t *testing.T) {
	// Three batches of version 0, an update's worth each. Overlapping,
	// the second is taken during the first update and trained with
	// version 1 (a lag of 1), the third during the second and trained
	// with version 2; in turn, likewise but each taken after the update
	// before it.
	for _, tc := range []struct {
		name        string
		cfg         map[string]any
		wantOverlap bool
		// What the three batches make: versions, and batches too stale.
		wantVersion, wantStale int64
	}{
		{"on", map[string]any{"overlap": true}, true, 3, 0},
		{"on, max_staleness 1", map[string]any{"overlap": true, "max_staleness": 1}, true, 2, 1},
		{"default on the CPU", map[string]any{}, false, 3, 0},
		{"off, max_staleness 0", map[string]any{"overlap": false, "max_staleness": 0}, false, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{}, 4)
			gate := make(chan struct{})
			t.Cleanup(trainerworker.SetUpdateHook(func() {
				entered <- struct{}{}
				<-gate
			}))
			opened := false
			open := func() {
				if !opened {
					opened = true
					close(gate)
				}
			}
			t.Cleanup(open) // the worker stops only once its update ends
			c := newCluster(t)
			tr := c.start(t, trainerworker.TypeName, 0)
			cfg := map[string]any{"batch_steps": 64, "seed": 1}
			for k, v := range tc.cfg {
				cfg[k] = v
			}
			c.run(t, tr.Name(), cfg)
			stats := func() overlapStats {
				var s overlapStats
				c.request(t, tr.Name(), member.CmdStats, nil, &s)
				return s
			}
			if got := stats().Overlap; got != tc.wantOverlap {
				t.Fatalf("overlap %v, want %v", got, tc.wantOverlap)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			prod := newProducer(t, c.repo)
			prod.post(t, cartPoleBatch(rng, 64, 0))
			select {
			case <-entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the first update did not begin")
			}
			// The update is held at the gate; the next update's worth,
			// then one more batch.
			prod.post(t, cartPoleBatch(rng, 64, 0))
			prod.post(t, cartPoleBatch(rng, 64, 0))
			if !tc.wantOverlap {
				// In turn: the loop is in the update; requests wait.
				time.Sleep(100 * time.Millisecond)
				open()
				checkEnd(t, c, tr.Name(), tc.wantVersion, tc.wantStale)
				return
			}
			eventually.NoError(t, 20*time.Second, "the next update's batch taken during the update", func() error {
				s, o := c.trainerStats(t, tr.Name()), stats()
				if !o.Updating || s.Version != 0 {
					return fmt.Errorf("updating %v at version %d: the update is held, it cannot have ended", o.Updating, s.Version)
				}
				if s.BufferSteps != 64 {
					return fmt.Errorf("%d steps buffered", s.BufferSteps)
				}
				return nil
			})
			// The buffer is full: the third batch waits in the stream, and
			// the loop sleeps until the update ends. A loop that woke for
			// it at every turn would poll thousands of times a second.
			before := stats().Polls
			time.Sleep(300 * time.Millisecond)
			o, s := stats(), c.trainerStats(t, tr.Name())
			if n := o.Polls - before; n > 300 {
				t.Errorf("%d polls in 300 ms with a full buffer: the loop spins", n)
			}
			if s.BufferSteps != 64 || s.Samples != 128 {
				t.Errorf("%d steps buffered, %d received, want 64 and 128: nothing past an update's worth is taken", s.BufferSteps, s.Samples)
			}
			open()
			checkEnd(t, c, tr.Name(), tc.wantVersion, tc.wantStale)
			if o := stats(); o.LagP99 != 2 {
				t.Errorf("policy lag p99 %v, want 2 (the third batch, taken during the second update)", o.LagP99)
			}
		})
	}
}

// checkEnd waits for the trainer to have received the three batches of
// TestOverlap and made wantVersion from them, dropping wantStale as too
// stale.
func checkEnd(t *testing.T, c *cluster, name string, wantVersion, wantStale int64) {
	t.Helper()
	eventually.NoError(t, 20*time.Second, "the three batches' updates", func() error {
		s := c.trainerStats(t, name)
		if s.Samples != 192 || s.Version != wantVersion || s.DroppedStale != wantStale || s.BufferSteps != 0 {
			return fmt.Errorf("%d steps received, version %d, %d batches dropped stale, %d steps buffered; want 192, %d, %d, 0",
				s.Samples, s.Version, s.DroppedStale, s.BufferSteps, wantVersion, wantStale)
		}
		return nil
	})
	if s := c.trainerStats(t, name); s.Trained != 64*wantVersion {
		t.Errorf("%d samples trained, want %d", s.Trained, 64*wantVersion)
	}
}

// TestDQNOverlap holds each DQN update at a gate: overlapping, the trainer
// answers meanwhile, and sends the held update's priorities only once it
// is let go; in turn, its loop is in the update and answers nothing.
func TestDQNOverlap(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		want bool
	}{
		{"on", map[string]any{"overlap": true}, true},
		{"default on the CPU", map[string]any{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entered := make(chan struct{}, 1)
			gate := make(chan struct{})
			var let sync.Once
			t.Cleanup(trainerworker.SetUpdateHook(func() {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-gate
			}))
			t.Cleanup(func() { let.Do(func() { close(gate) }) })
			c := newCluster(t)
			cfg := map[string]any{"batch_size": 32, "eval_every": 1 << 20}
			for k, v := range tc.cfg {
				cfg[k] = v
			}
			_, tr := startDQN(t, c, cfg)
			select {
			case <-entered:
			case <-time.After(20 * time.Second):
				t.Fatal("no update began")
			}
			var st struct {
				Overlap        bool  `msgpack:"overlap"`
				Updating       bool  `msgpack:"updating"`
				Updates        int64 `msgpack:"updates"`
				PrioritiesSent int64 `msgpack:"priorities_sent"`
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := c.panel.Request(ctx, tr.Name(), member.CmdStats, nil, &st)
			if !tc.want {
				if err == nil {
					t.Fatal("stats answered while the loop is in its update")
				}
				let.Do(func() { close(gate) })
				eventually.True(t, 20*time.Second, "updates once let go", func() bool {
					c.request(t, tr.Name(), member.CmdStats, nil, &st)
					return st.Updates > 2 && !st.Overlap
				})
				return
			}
			if err != nil {
				t.Fatalf("stats while an update is held: %v", err)
			}
			if !st.Overlap || !st.Updating || st.Updates != 0 || st.PrioritiesSent != 0 {
				t.Fatalf("while the first update is held: %+v", st)
			}
			let.Do(func() { close(gate) })
			eventually.True(t, 20*time.Second, "updates and priorities once let go", func() bool {
				c.request(t, tr.Name(), member.CmdStats, nil, &st)
				return st.Updates > 2 && st.PrioritiesSent >= 3*32
			})
		})
	}
}
