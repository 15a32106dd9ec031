package worker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// logLines is a slog.Handler that keeps each record's message and attributes.
type logLines struct{ lines *[]string }

func (h logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h logLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h logLines) WithGroup(string) slog.Handler            { return h }
func (h logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	*h.lines = append(*h.lines, b.String())
	return nil
}

func TestKindOf(t *testing.T) {
	tests := []struct{ report, kind string }{
		{"consumer-bound: back-pressured 97% of the last minute", "consumer-bound"},
		{"consumer-bound: back-pressured 51%; inference-bound: waited 60% (round trip 1.2ms)", "consumer-bound; inference-bound"},
		{"rank 1 of a group of 2; all-reduces 31% of the last update", "rank  of a group of ; all-reduces % of the last update"},
		{"group of 2 forming for 12s: ranks [1] not registered", "group of  forming for s"},
		{"inference: 1 policy worker(s) registered but none accepting requests", "inference"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := kindOf(tt.report); got != tt.kind {
			t.Errorf("kindOf(%q) = %q, want %q", tt.report, got, tt.kind)
		}
	}
	// Figures that move are no change of kind.
	if kindOf("rank 1 of a group of 2; all-reduces 31% of the last update") != kindOf("rank 1 of a group of 2; all-reduces 7% of the last update") {
		t.Error("a changed percentage changed the kind")
	}
}

func TestCondition(t *testing.T) {
	type report struct {
		at   time.Duration
		text string
	}
	// every returns reports of a and b in turn every step from 0 to end.
	every := func(step, end time.Duration, a, b string) []report {
		var rs []report
		for at, i := time.Duration(0), 0; at <= end; at, i = at+step, i+1 {
			rs = append(rs, report{at, []string{a, b}[i%2]})
		}
		return rs
	}
	tests := []struct {
		name    string
		reports []report
		shown   string
		writes  int
		logs    []string // prefixes of the lines logged
	}{
		{"flapping is logged once and stays shown",
			every(100*time.Millisecond, 10*time.Second, "back-pressure", ""),
			"back-pressure", 1, []string{"degraded warning=back-pressure"}},
		{"over once clear for the hold",
			[]report{{0, "x"}, {time.Second, ""}, {2 * time.Second, "x"}, {3 * time.Second, ""}, {7 * time.Second, ""}, {8 * time.Second, ""}},
			"", 2, []string{"degraded warning=x", "recovered was=x lasted=2s lapses=1"}},
		{"a new text waits for rewrite",
			[]report{{0, "a: 1"}, {500 * time.Millisecond, "a: 2"}},
			"a: 1", 1, []string{"degraded warning=a: 1"}},
		{"new figures are written after rewrite, and not logged",
			[]report{{0, "a: 1"}, {500 * time.Millisecond, "a: 2"}, {1200 * time.Millisecond, "a: 2"}},
			"a: 2", 2, []string{"degraded warning=a: 1"}},
		{"a new kind is logged once it has held for the hold",
			append([]report{{0, "a: 1"}}, every(time.Second, 8*time.Second, "a: 1; b: 2", "a: 3; b: 4")[1:]...),
			"a: 1; b: 2", 9, []string{"degraded warning=a: 1", "warning changed warning=a: 1; b: 2 was=a: 3; b: 4"}},
		{"a kind that comes and goes within the hold is not logged",
			every(time.Second, 30*time.Second, "a: 1", "b: 1"),
			"a: 1", 31, []string{"degraded warning=a: 1"}},
		{"a kind logged, then the first again",
			[]report{{0, "a: 1"}, {time.Second, "b: 1"}, {7 * time.Second, "b: 2"}, {8 * time.Second, "a: 2"}, {14 * time.Second, "a: 3"}},
			"a: 3", 5, []string{"degraded warning=a: 1", "warning changed warning=b: 2 was=b: 1", "warning changed warning=a: 3 was=a: 2"}},
		{"clear and never seen: nothing", []report{{0, ""}, {time.Hour, ""}}, "", 0, nil},
	}
	t0 := time.Unix(1_000_000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines []string
			log := slog.New(logLines{&lines})
			c := condition{onset: "degraded", changed: "warning changed", over: "recovered", key: "warning", level: slog.LevelWarn, hold: 5 * time.Second, rewrite: time.Second}
			writes := 0
			for _, r := range tt.reports {
				if c.update(t0.Add(r.at), r.text, log) {
					writes++
				}
			}
			if c.shown != tt.shown || writes != tt.writes || len(lines) != len(tt.logs) {
				t.Fatalf("shown %q after %d writes, logged %q; want %q after %d writes, %d lines", c.shown, writes, lines, tt.shown, tt.writes, len(tt.logs))
			}
			for i, want := range tt.logs {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d %q, want it to start %q", i, lines[i], want)
				}
			}
		})
	}
}

// TestConditionSettle: a finished worker shows what its type reports now.
func TestConditionSettle(t *testing.T) {
	var lines []string
	log := slog.New(logLines{&lines})
	c := condition{onset: "note", over: "note over", key: "note", hold: time.Minute, rewrite: time.Minute}
	t0 := time.Unix(1_000_000, 0)
	c.update(t0, "bound 90%", log)
	c.settle(t0.Add(time.Second), "bound 80%", log)
	if c.shown != "bound 80%" {
		t.Errorf("shown %q after settling on a new text", c.shown)
	}
	c.settle(t0.Add(2*time.Second), "", log)
	if c.shown != "" || len(lines) != 2 || !strings.HasPrefix(lines[1], "note over was=bound 80%") {
		t.Errorf("shown %q, logged %q after settling clear", c.shown, lines)
	}
}
