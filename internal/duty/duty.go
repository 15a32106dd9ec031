package duty

import "time"

// Window is the share of time a condition held over the last Span. The
// zero value is not usable; call New. Not safe for concurrent use.
type Window struct {
	span   time.Duration
	bucket time.Duration
	on     []time.Duration // time the condition held, per bucket
	all    []time.Duration // time recorded, per bucket
	last   int64           // index (time / bucket) of the newest bucket written
}

// New makes a window of span divided into n buckets (at least 1); the
// share it reports moves by at most one bucket's worth at a time.
func New(span time.Duration, n int) *Window {
	n = max(n, 1)
	return &Window{span: span, bucket: max(span/time.Duration(n), 1), on: make([]time.Duration, n), all: make([]time.Duration, n), last: -1}
}

// Span is the window's length.
func (w *Window) Span() time.Duration { return w.span }

// Add records that from end-d to end the condition held (on) or not. Time
// before the window is dropped; an interval over several buckets is
// spread across them.
func (w *Window) Add(end time.Time, d time.Duration, on bool) {
	if d <= 0 {
		return
	}
	d = min(d, w.span)
	t := end.UnixNano()
	w.advance(t / int64(w.bucket))
	for d > 0 {
		idx := t / int64(w.bucket)
		part := min(d, time.Duration(t-idx*int64(w.bucket)))
		if part == 0 { // t is on a bucket's start: the time before it is the previous bucket's
			part = min(d, w.bucket)
			idx--
		}
		if w.last-idx >= int64(len(w.on)) {
			return // before the window
		}
		i := w.slot(idx)
		w.all[i] += part
		if on {
			w.on[i] += part
		}
		d -= part
		t -= int64(part)
	}
}

// Share is the fraction of the recorded time in the window, as of now,
// during which the condition held, and how much time was recorded; 0, 0
// when nothing was.
func (w *Window) Share(now time.Time) (share float64, recorded time.Duration) {
	w.advance(now.UnixNano() / int64(w.bucket))
	var on time.Duration
	for i := range w.all {
		on += w.on[i]
		recorded += w.all[i]
	}
	if recorded == 0 {
		return 0, 0
	}
	return float64(on) / float64(recorded), recorded
}

// advance makes idx the newest bucket, emptying those it passes.
func (w *Window) advance(idx int64) {
	if idx <= w.last {
		return
	}
	if w.last < 0 || idx-w.last >= int64(len(w.on)) {
		clear(w.on)
		clear(w.all)
	} else {
		for b := w.last + 1; b <= idx; b++ {
			i := w.slot(b)
			w.on[i], w.all[i] = 0, 0
		}
	}
	w.last = idx
}

func (w *Window) slot(idx int64) int {
	n := int64(len(w.on))
	return int(((idx % n) + n) % n)
}
