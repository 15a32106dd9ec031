package worker

import (
	"testing"
	"time"
)

// The spinner looks while the recent waits were shorter than its max on
// average, and forgets an idle spell after about a dozen short waits.
func TestSpinnerBudget(t *testing.T) {
	const spinMax = 100 * time.Microsecond
	for _, c := range []struct {
		name  string
		max   time.Duration
		waits []time.Duration // noted in order, after an idle spell
		want  time.Duration
	}{
		{"off", -1, nil, 0},
		{"after an idle spell", spinMax, nil, 0},
		{"one short wait does not undo an idle spell", spinMax, repeat(time.Microsecond, 1), 0},
		{"eleven short waits do", spinMax, repeat(time.Microsecond, 11), spinMax},
		{"waits just under max", spinMax, repeat(90*time.Microsecond, 40), spinMax},
		{"waits over max", spinMax, repeat(150*time.Microsecond, 40), 0},
		{"a long wait among short ones", spinMax, append(repeat(10*time.Microsecond, 40), time.Second), spinMax},
		{"an idle spell after short waits", spinMax, append(repeat(10*time.Microsecond, 40), repeat(time.Second, 2)...), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := spinner{max: c.max, avg: spinWaitCap * c.max}
			for _, d := range c.waits {
				s.note(d)
			}
			if got := s.budget(); got != c.want {
				t.Fatalf("budget %v after waits %v (average %v), want %v", got, c.waits, s.avg, c.want)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// look returns as soon as ready does, and gives up once the budget has
// passed.
func TestSpinnerLook(t *testing.T) {
	var s spinner
	calls := 0
	if !s.look(time.Now(), time.Hour, func(turn int) bool { calls++; return turn == 3 }) {
		t.Fatal("look gave up although input came")
	}
	if calls != 3 {
		t.Fatalf("ready called %d times, want 3", calls)
	}
	calls = 0
	if s.look(time.Now(), time.Millisecond, func(int) bool { calls++; return false }) {
		t.Fatal("look reported input that never came")
	}
	if calls == 0 {
		t.Fatal("look did not call ready")
	}
	calls = 0
	if s.look(time.Now().Add(-time.Second), time.Millisecond, func(int) bool { calls++; return false }) || calls != 1 {
		t.Fatalf("a look whose budget has passed calls ready once, not %d times", calls)
	}
}
