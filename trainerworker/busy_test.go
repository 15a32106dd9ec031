package trainerworker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/trainerworker"
)

// TestTrainerBoundNote feeds a PPO trainer of MinAtar's network on the CPU
// faster than it learns: it is the bound, and says so in its note, with
// its learner's and its loop's shares in its stats.
func TestTrainerBoundNote(t *testing.T) {
	c := newCluster(t)
	tr := c.start(t, trainerworker.TypeName, 0)
	c.run(t, tr.Name(), minAtarPPO(512))
	feedMinAtarBehind(t, c.repo)
	eventually.True(t, time.Minute, "a trainer-bound note", func() bool {
		return strings.HasPrefix(c.status(t, tr.Name()).Note, "trainer-bound: updating ")
	})
	var st map[string]any
	c.request(t, tr.Name(), "stats", nil, &st)
	learner, loop := stat(t, st, "learner_busy_pct"), stat(t, st, "loop_busy_pct")
	// In turn (the CPU's default) the two add up to the loop's time.
	if learner <= 0 || loop <= 0 || learner+loop < 80 || learner+loop > 100.5 {
		t.Errorf("learner_busy_pct %v, loop_busy_pct %v: want both above 0, together 80-100 (note %q)", learner, loop, c.status(t, tr.Name()).Note)
	}
	if stat(t, st, "update_s") <= 0 || stat(t, st, "loop_s") <= 0 {
		t.Errorf("update_s %v, loop_s %v", stat(t, st, "update_s"), stat(t, st, "loop_s"))
	}
}
