package replay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Inserters and samplers at once, with deadlines: the limiter keeps
// inserts*spi - samples inside its window at every moment a monitor looks,
// every failure is a RateLimitError of the right side, and everything the
// inserters were told succeeded is counted.
func TestLimiterConcurrent(t *testing.T) {
	lim := Limiter{MinSize: 20, SamplesPerInsert: 2, ErrorBuffer: 12}
	tb := mustTable(t, Options{Name: "t", MaxSize: 100000, Sampler: Prioritized, Remover: RemoveFIFO, Alpha: 0.6, Limiter: lim})
	lo, hi := lim.bounds()
	const inserters, samplers, perInserter, batch = 4, 3, 400, 8

	var inserted, sampled, insertTimeouts, sampleTimeouts atomic.Int64
	stop := make(chan struct{})
	var monitorErr atomic.Value
	var mon sync.WaitGroup
	mon.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			c := tb.Counters()
			diff := float64(c.Inserts)*lim.SamplesPerInsert - float64(c.Samples)
			if diff > hi || (c.Samples > 0 && diff < lo) {
				monitorErr.Store(errors.New("window left"))
				return
			}
			time.Sleep(20 * time.Microsecond)
		}
	})
	var ins, smp sync.WaitGroup
	for range inserters {
		ins.Go(func() {
			for range perInserter {
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
					_, err := tb.Insert(ctx, 1, nil)
					cancel()
					if err == nil {
						inserted.Add(1)
						break
					}
					var rl *RateLimitError
					if !errors.As(err, &rl) || rl.Blocked != SideInsert || rl.Starved() != "samples" {
						t.Errorf("insert: %v", err)
						return
					}
					insertTimeouts.Add(1)
				}
			}
		})
	}
	done := make(chan struct{})
	for range samplers {
		smp.Go(func() {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				s, err := tb.Sample(ctx, batch)
				cancel()
				if err == nil {
					sampled.Add(int64(len(s)))
					continue
				}
				var rl *RateLimitError
				if !errors.As(err, &rl) || rl.Blocked != SideSample || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("sample: %v", err)
					return
				}
				sampleTimeouts.Add(1)
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	ins.Wait()
	close(done)
	smp.Wait()
	close(stop)
	mon.Wait()
	if e := monitorErr.Load(); e != nil {
		t.Fatal(e)
	}
	c := tb.Counters()
	if c.Inserts != inserted.Load() || c.Inserts != inserters*perInserter || c.Samples != sampled.Load() {
		t.Fatalf("counters %+v; inserted %d sampled %d", c, inserted.Load(), sampled.Load())
	}
	if c.InsertTimeouts != insertTimeouts.Load() || c.SampleTimeouts != sampleTimeouts.Load() {
		t.Fatalf("timeouts %+v; counted %d %d", c, insertTimeouts.Load(), sampleTimeouts.Load())
	}
	// The samplers kept up: the learner took about spi samples per insert.
	if diff := float64(c.Inserts)*lim.SamplesPerInsert - float64(c.Samples); diff < lo || diff > hi {
		t.Fatalf("final diff %v outside [%v, %v]", diff, lo, hi)
	}
}

// An insert past the ratio waits and times out naming the insert side; a
// sample taken meanwhile lets a waiting insert through.
func TestLimiterBlocksInsertsUntilSampled(t *testing.T) {
	lim := Limiter{MinSize: 2, SamplesPerInsert: 1, ErrorBuffer: 1}
	tb := mustTable(t, Options{Name: "t", MaxSize: 100, Sampler: Uniform, Remover: RemoveFIFO, Limiter: lim})
	// window [1, 3]: diff = inserts - samples may reach 3.
	for range 3 {
		if _, err := tb.TryInsert(1, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err := tb.TryInsert(1, nil)
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.Blocked != SideInsert || !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("fourth insert: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := tb.Insert(ctx, 1, nil)
		got <- err
	}()
	// The insert is waiting (its wait is counted) before we sample.
	for tb.Counters().InsertWaits == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := tb.TrySample(1); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting insert: %v", err)
	}
	if _, err := tb.TrySample(lim.maxBatch() + 1); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("oversized batch: %v", err)
	}
}
