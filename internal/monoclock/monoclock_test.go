package monoclock

import (
	"testing"
	"time"
)

// Now orders and subtracts with time.Now's times, in either order, and
// stays within the wall clock's reading while the wall clock is not set.
func TestNowAgreesWithTimeNow(t *testing.T) {
	for range 1000 {
		before := time.Now()
		m := Now()
		after := time.Now()
		if m.Before(before) || m.After(after) {
			t.Fatalf("Now %v outside [%v, %v]", m, before, after)
		}
		if d := after.Sub(m); d < 0 {
			t.Fatalf("time.Now after Now, Sub = %v", d)
		}
		if d := m.Sub(before); d < 0 {
			t.Fatalf("Now after time.Now, Sub = %v", d)
		}
	}
	if d := time.Until(Now()); d > 0 {
		t.Errorf("Now is %v in the future", d)
	}
	// The wall clock may have been slewed since start; far apart would
	// mean Now drops its monotonic base.
	if d := time.Now().Round(0).Sub(Now().Round(0)); d > time.Second || d < -time.Second {
		t.Errorf("wall clocks of time.Now and Now %v apart", d)
	}
}

func BenchmarkNow(b *testing.B) {
	for _, tc := range []struct {
		name string
		now  func() time.Time
	}{{"monoclock", Now}, {"time.Now", time.Now}} {
		b.Run(tc.name, func(b *testing.B) {
			var t time.Time
			for range b.N {
				t = tc.now()
			}
			_ = t
		})
	}
}
