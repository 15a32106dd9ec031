package duty

import (
	"math"
	"testing"
	"time"
)

func TestMeterShare(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	type sample struct {
		at    time.Duration // after t0
		total time.Duration
	}
	tests := []struct {
		name    string
		samples []sample
		now     time.Duration
		total   time.Duration
		share   float64
		over    time.Duration
	}{
		{"nothing", nil, time.Second, time.Second, 0, 0},
		{"busy throughout", []sample{{0, 0}}, 10 * time.Second, 10 * time.Second, 1, 10 * time.Second},
		{"a quarter", []sample{{0, 0}, {5 * time.Second, time.Second}}, 8 * time.Second, 2 * time.Second, 0.25, 8 * time.Second},
		// Samples closer than span/n (5 s) are not kept: the first stays
		// the oldest.
		{"samples close together are dropped", []sample{{0, 0}, {time.Second, time.Second}, {2 * time.Second, 2 * time.Second}},
			4 * time.Second, 2 * time.Second, 0.5, 4 * time.Second},
		// At 70 s the samples at 0 s and 5 s are out of the minute: the
		// share is from the one at 10 s.
		{"old samples leave the span", []sample{{0, 0}, {5 * time.Second, 5 * time.Second}, {10 * time.Second, 10 * time.Second},
			{40 * time.Second, 10 * time.Second}}, 70 * time.Second, 10 * time.Second, 0, 60 * time.Second},
		{"every sample too old", []sample{{0, 0}}, 2 * time.Minute, time.Minute, 0, 0},
		// The total counts work still running up to now, which an earlier
		// sample's total may overstate against a later finish's account:
		// clipped, not negative.
		{"clipped below", []sample{{0, 5 * time.Second}}, 5 * time.Second, 4 * time.Second, 0, 5 * time.Second},
		{"clipped above", []sample{{0, 0}}, 5 * time.Second, 6 * time.Second, 1, 5 * time.Second},
		{"now at the only sample", []sample{{0, 0}}, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMeter(time.Minute, 12)
			for _, s := range tt.samples {
				m.Sample(t0.Add(s.at), s.total)
			}
			share, over := m.Share(t0.Add(tt.now), tt.total)
			if math.Abs(share-tt.share) > 1e-9 || over != tt.over {
				t.Errorf("Share = %v over %v, want %v over %v", share, over, tt.share, tt.over)
			}
		})
	}
}

// TestMeterRing fills the ring several times over at a steady half share:
// the share stays a half, over the last span.
func TestMeterRing(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	m := NewMeter(time.Minute, 12)
	for s := 0; s <= 300; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		total := time.Duration(s) * time.Second / 2
		m.Sample(now, total)
		if s < 1 {
			continue
		}
		share, over := m.Share(now, total)
		if math.Abs(share-0.5) > 1e-9 || over > time.Minute || (s >= 60 && over < 55*time.Second) {
			t.Fatalf("at %d s: share %v over %v", s, share, over)
		}
	}
}
