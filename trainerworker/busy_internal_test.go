package trainerworker

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/telemetry"
)

// TestBusyClock drives a trainer's busy clock through a minute of polls
// of 100 ms: each poll busy outside updates for loop ms, and an update of
// update ms every poll, run on the loop or on a job that the next poll
// collects.
func TestBusyClock(t *testing.T) {
	tests := []struct {
		name         string
		onJob        bool
		loop, update time.Duration // per 100 ms poll period
		learner      float64       // shares of the minute
		loopShare    float64
		note         string // what the note starts with; "": none
	}{
		{"in turn, trainer-bound", false, 30 * time.Millisecond, 65 * time.Millisecond, 0.65, 0.30, "trainer-bound: updating 65%"},
		{"in turn, waiting for samples", false, 10 * time.Millisecond, 20 * time.Millisecond, 0.20, 0.10, ""},
		{"overlapping, learner-bound", true, 30 * time.Millisecond, 100 * time.Millisecond, 1, 0.30, "trainer-bound: updating 100%"},
		{"overlapping, intake-bound", true, 95 * time.Millisecond, 40 * time.Millisecond, 0.40, 0.95, "trainer-bound: updating 40%"},
		{"overlapping, waiting for samples", true, 30 * time.Millisecond, 60 * time.Millisecond, 0.60, 0.30, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := telemetry.NewRegistry()
			c := newBusyClock(reg.Worker(telemetry.Identity{Experiment: "e", Trial: "t", Type: TypeName}).Trainer())
			t0 := time.Unix(1_000_000, 0)
			const period = 100 * time.Millisecond
			for i := range 1200 { // two minutes
				begin := t0.Add(time.Duration(i) * period)
				onLoop := c.onLoop
				if tt.onJob {
					if i > 0 {
						c.finished(tt.update, false) // collected from the job
					}
					c.polled(begin, begin.Add(tt.loop), c.onLoop-onLoop)
				} else {
					c.finished(tt.update, true)
					c.polled(begin, begin.Add(tt.update+tt.loop), c.onLoop-onLoop)
				}
			}
			now := t0.Add(1200 * period)
			learner, loop := c.shares(now)
			if math.Abs(learner-tt.learner) > 0.02 || math.Abs(loop-tt.loopShare) > 0.02 {
				t.Errorf("shares: learner %.3f, loop %.3f; want %.3f, %.3f", learner, loop, tt.learner, tt.loopShare)
			}
			note := c.note(now, tt.onJob)
			if (tt.note == "") != (note == "") || !strings.HasPrefix(note, tt.note) {
				t.Errorf("note %q, want one starting %q", note, tt.note)
			}
			st := map[string]any{}
			c.stats(st, now)
			if st["update_s"].(float64) <= 0 || st["loop_s"].(float64) <= 0 {
				t.Errorf("stats %v", st)
			}
		})
	}
}
