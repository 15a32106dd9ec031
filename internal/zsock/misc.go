package zsock

import (
	"cmp"
	"log/slog"
	"time"
)

// LoggerOr returns l, or slog.Default() if l is nil.
func LoggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// RateLog logs a recurring problem (malformed input) at most once per
// Interval (default one second), with the number of occurrences it left
// out, so a peer that sends garbage in a loop cannot flood the log. The
// zero value is ready to use.
type RateLog struct {
	Interval   time.Duration
	last       time.Time
	suppressed int64
}

// Warn logs msg and args at Warn level unless a message was logged less
// than Interval ago, in which case it only counts it.
func (r *RateLog) Warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < cmp.Or(r.Interval, time.Second) {
		r.suppressed++
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn(msg, args...)
}
