package worker

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// condition is what a worker type reports about itself between polls (a
// warning, a note), shown with hysteresis: a report that comes and goes
// several times a second (an actor back-pressured by the trainer between
// two of its batches) is logged once when it starts, counted while it
// lasts, and logged as over once it has been clear for hold. The status
// record follows what is shown, so a flapping report does not write to
// etcd at every flip either. A report whose kind changes while it lasts
// (an actor that was inference-bound becomes consumer-bound: see kindOf)
// is logged again once the new kind has held for hold; a change of its
// figures alone is not logged.
type condition struct {
	// onset, changed and over are the log messages, key the attribute
	// that holds the report; level is onset's and changed's.
	onset, changed, over, key string
	level                     slog.Level
	hold                      time.Duration // clear this long before it is over
	// rewrite is how often a changed text of a report that lasts may be
	// written to the status record; ask how often the type is asked for
	// its report (0: after every poll).
	rewrite, ask time.Duration
	asked        time.Time // when the type was last asked

	shown   string    // what the status record says; "": nothing
	since   time.Time // when shown started
	seen    time.Time // when the type last reported it
	written time.Time // when shown's text was last written
	clear   bool      // the type's last report was ""
	lapses  int       // times it cleared and came back while shown

	kind     string // kindOf the report last logged
	next     string // a kind other than kind reported since nextFrom; "": none
	nextFrom time.Time
}

// kindOf is what a report is about, without its figures: the label before
// the first colon of each of its "; "-separated parts, or the part itself
// where it has none, without digits ("consumer-bound; inference-bound" for
// "consumer-bound: back-pressured 97% ...; inference-bound: waited ...",
// "rank  of a group of ; all-reduces % of the last update" for a trainer
// group's note), so that a changing figure is no change of kind.
func kindOf(report string) string {
	parts := strings.Split(report, "; ")
	for i, p := range parts {
		if label, _, ok := strings.Cut(p, ":"); ok {
			p = label
		}
		parts[i] = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, p)
	}
	return strings.Join(parts, "; ")
}

// due reports whether the type is to be asked for its report at now, and
// if so counts it as asked.
func (c *condition) due(now time.Time) bool {
	if now.Sub(c.asked) < c.ask {
		return false
	}
	c.asked = now
	return true
}

// update takes the type's report at now; true: the status record must be
// written again.
func (c *condition) update(now time.Time, report string, log *slog.Logger) bool {
	if report != "" {
		switch {
		case c.shown == "":
			c.shown, c.since, c.seen, c.written, c.clear, c.lapses = report, now, now, now, false, 0
			c.kind, c.next = kindOf(report), ""
			log.Log(context.Background(), c.level, c.onset, c.key, report)
			return true
		case c.clear:
			c.lapses++
			c.clear = false
		}
		c.seen = now
		if c.kindChanged(now, report) {
			log.Log(context.Background(), c.level, c.changed, c.key, report, "was", c.shown)
			c.shown, c.written = report, now
			return true
		}
		if report != c.shown && now.Sub(c.written) >= c.rewrite {
			c.shown, c.written = report, now
			return true
		}
		return false
	}
	if c.shown == "" {
		return false
	}
	c.clear = true
	if now.Sub(c.seen) < c.hold {
		return false
	}
	c.end(log)
	return true
}

// kindChanged reports whether report's kind differs from the one last
// logged and has held for hold; if so it becomes the logged kind.
func (c *condition) kindChanged(now time.Time, report string) bool {
	k := kindOf(report)
	switch {
	case k == c.kind:
		c.next = ""
		return false
	case k != c.next:
		c.next, c.nextFrom = k, now
		if c.hold > 0 {
			return false
		}
	case now.Sub(c.nextFrom) < c.hold:
		return false
	}
	c.kind, c.next = k, ""
	return true
}

// settle shows the type's report as it is now, without waiting: a worker
// that has finished will not report again.
func (c *condition) settle(now time.Time, report string, log *slog.Logger) {
	if report == "" {
		if c.shown != "" {
			c.end(log)
		}
		return
	}
	c.update(now, report, log)
	c.shown = report
}

// end logs that what was shown is over, and clears it.
func (c *condition) end(log *slog.Logger) {
	log.Info(c.over, "was", c.shown, "lasted", c.seen.Sub(c.since).Round(time.Millisecond).String(), "lapses", c.lapses)
	c.shown = ""
}
