package actorworker

import (
	"testing"
	"time"
)

// TestRingSlots: ring_slots when set; otherwise two slots once stepping the
// whole ring takes AutoRingTime, and one again only below 3/4 of it.
func TestRingSlots(t *testing.T) {
	perStep := func(ring int, d time.Duration) float64 { return float64(d) / float64(ring) }
	for _, tc := range []struct {
		name       string
		configured int
		ring       int
		stepCost   float64 // ns per environment step
		was        int     // slots before
		want       int
	}{
		{"configured", 3, 8, perStep(8, time.Second), 0, 3},
		{"auto, not measured yet", 0, 8, 0, 0, 1},
		{"auto, cheap ring", 0, 8, perStep(8, 25*time.Microsecond), 0, 1},
		{"auto, ring at the threshold", 0, 256, perStep(256, AutoRingTime), 1, 2},
		{"auto, dearer ring", 0, 256, perStep(256, 2*AutoRingTime), 1, 2},
		{"auto, two slots, a little cheaper", 0, 256, perStep(256, AutoRingTime*7/8), 2, 2},
		{"auto, two slots, much cheaper", 0, 256, perStep(256, AutoRingTime/2), 2, 1},
		{"auto, a ring of one", 0, 1, perStep(1, time.Second), 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			targets := make([]*EnvTarget, tc.ring)
			for i := range targets {
				targets[i] = &EnvTarget{}
			}
			w := &Worker{cfg: Config{RingSlots: tc.configured}, ring: NewEnvRing(targets...), stepCost: tc.stepCost, slots: tc.was}
			if got := w.ringSlots(); got != tc.want {
				t.Fatalf("ringSlots() = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestNoteTurn: the first turn sets the cost per step; later ones move it
// a sixteenth of the way; a turn that stepped nothing says nothing.
func TestNoteTurn(t *testing.T) {
	var w Worker
	w.noteTurn(time.Millisecond, 0)
	if w.stepCost != 0 {
		t.Fatalf("a turn of no steps set the cost to %v", w.stepCost)
	}
	w.noteTurn(160*time.Microsecond, 8) // 20 us a step
	if w.stepCost != 20000 {
		t.Fatalf("cost after the first turn %v ns, want 20000", w.stepCost)
	}
	w.noteTurn(360*time.Microsecond, 1) // 360 us: 20 + (360-20)/16 = 41.25 us
	if w.stepCost != 41250 {
		t.Fatalf("cost after the second turn %v ns, want 41250", w.stepCost)
	}
}
