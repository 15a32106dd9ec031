package trainerworker

import (
	"fmt"
	"time"

	"github.com/distrl/distrl/internal/duty"
	"github.com/distrl/distrl/telemetry"
)

// Shares of the last minute for a trainer's Note to call it bound, and
// below which that goes again.
const (
	trainerBoundShare = 0.9
	trainerClearShare = 0.8
)

// busyClock keeps a trainer's two busy times: its learner's (updates, on
// the loop or on the job) and its loop's outside updates (taking samples
// in, decoding, publishing, checkpointing). Their shares of the last
// minute say what bounds the trainer: with overlap either one near 100%,
// in turn the two together; neither, and it waits for samples. Its
// methods run on the worker's loop.
type busyClock struct {
	updates time.Duration // the updates' own time, on the loop or on the job
	onLoop  time.Duration // of it, the updates run on the loop
	loop    time.Duration // Poll time outside updates

	learnerMeter, loopMeter *duty.Meter
	bound                   duty.Latch
	metrics                 *telemetry.Trainer
}

func newBusyClock(m *telemetry.Trainer) *busyClock {
	return &busyClock{learnerMeter: newMinuteMeter(), loopMeter: newMinuteMeter(),
		bound: duty.Latch{On: trainerBoundShare, Off: trainerClearShare}, metrics: m}
}

func newMinuteMeter() *duty.Meter { return duty.NewMeter(time.Minute, 12) }

// finished accounts an update that took took, on the loop or on the job.
// It counts once it ended: an update of the job done but not yet
// collected by a busy loop is not the learner's time, and one still
// running shows in the next figures.
func (c *busyClock) finished(took time.Duration, onLoop bool) {
	c.updates += took
	if onLoop {
		c.onLoop += took
	}
	c.metrics.UpdateSeconds.Add(took.Seconds())
}

// polled accounts a Poll from begin to end, in which updates that ran on
// the loop took onLoop, and samples both totals.
func (c *busyClock) polled(begin, end time.Time, onLoop time.Duration) {
	d := max(end.Sub(begin)-onLoop, 0)
	c.loop += d
	c.metrics.LoopSeconds.Add(d.Seconds())
	c.learnerMeter.Sample(end, c.updates)
	c.loopMeter.Sample(end, c.loop)
}

// shares are the learner's and the loop's shares of the last minute; 0
// until a second is measured.
func (c *busyClock) shares(now time.Time) (learner, loop float64) {
	learner, over := c.learnerMeter.Share(now, c.updates)
	loop, _ = c.loopMeter.Share(now, c.loop)
	if over < time.Second {
		return 0, 0
	}
	return learner, loop
}

// stats adds update_s and loop_s (seconds in all) and learner_busy_pct and
// loop_busy_pct (the last minute's shares).
func (c *busyClock) stats(out map[string]any, now time.Time) {
	learner, loop := c.shares(now)
	out["update_s"] = c.updates.Seconds()
	out["loop_s"] = c.loop.Seconds()
	out["learner_busy_pct"] = learner * 100
	out["loop_busy_pct"] = loop * 100
}

// note says the trainer is the bound when its learner, its loop, or (in
// turn) the two together were busy trainerBoundShare of the last minute:
// then it is the trial's slowest part, and the split says which side to
// speed up. Nothing while it waits for samples. overlap says the two run
// at once.
func (c *busyClock) note(now time.Time, overlap bool) string {
	learner, loop := c.shares(now)
	busy := learner + loop
	if overlap {
		busy = max(learner, loop)
	}
	if !c.bound.At(busy) {
		return ""
	}
	return fmt.Sprintf("trainer-bound: updating %.0f%% of the last minute, its loop (taking samples in, publishing) busy %.0f%%", learner*100, loop*100)
}
