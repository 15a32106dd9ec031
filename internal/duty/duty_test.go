package duty

import (
	"math"
	"testing"
	"time"
)

func TestWindowShare(t *testing.T) {
	t0 := time.Unix(1_000_000, 0) // on a bucket boundary
	type add struct {
		at time.Duration // end, after t0
		d  time.Duration
		on bool
	}
	tests := []struct {
		name     string
		adds     []add
		now      time.Duration
		share    float64
		recorded time.Duration
	}{
		{"nothing", nil, 0, 0, 0},
		{"all on", []add{{time.Second, time.Second, true}}, time.Second, 1, time.Second},
		{"flapping three quarters", []add{
			{100 * time.Millisecond, 100 * time.Millisecond, true},
			{200 * time.Millisecond, 100 * time.Millisecond, true},
			{300 * time.Millisecond, 100 * time.Millisecond, true},
			{400 * time.Millisecond, 100 * time.Millisecond, false},
		}, 400 * time.Millisecond, 0.75, 400 * time.Millisecond},
		{"old time leaves the window", []add{
			{5 * time.Second, 5 * time.Second, true},
			{65 * time.Second, 10 * time.Second, false},
		}, 65 * time.Second, 0, 10 * time.Second},
		// The window is its newest bucket (here empty: 90 s starts one)
		// and the 11 before it.
		{"a long interval is spread and clipped to the window", []add{
			{90 * time.Second, 90 * time.Second, true},
		}, 90 * time.Second, 1, 55 * time.Second},
		{"partly aged", []add{
			{10 * time.Second, 10 * time.Second, true},
			{20 * time.Second, 10 * time.Second, true},
			{30 * time.Second, 10 * time.Second, false},
		}, 65 * time.Second, 0.5, 20 * time.Second},
		{"an interval that ends mid bucket", []add{
			{7500 * time.Millisecond, 5 * time.Second, true},
			{10 * time.Second, 2500 * time.Millisecond, false},
		}, 10 * time.Second, 2.0 / 3, 7500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(time.Minute, 12)
			for _, a := range tt.adds {
				w.Add(t0.Add(a.at), a.d, a.on)
			}
			share, rec := w.Share(t0.Add(tt.now))
			if math.Abs(share-tt.share) > 1e-9 || rec != tt.recorded {
				t.Errorf("Share = %.4f over %v, want %.4f over %v", share, rec, tt.share, tt.recorded)
			}
		})
	}
}

func TestWindowAddAllocates(t *testing.T) {
	w := New(time.Minute, 12)
	now := time.Unix(1_000_000, 0)
	allocs := testing.AllocsPerRun(100, func() {
		now = now.Add(3 * time.Millisecond)
		w.Add(now, 3*time.Millisecond, true)
		w.Share(now)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Add and Share, want 0", allocs)
	}
}
