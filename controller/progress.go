package controller

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress writes the controller's output: event lines, and a status line
// that is redrawn in place on a terminal and printed as plain lines
// otherwise (a log file, a pipe, a test).
type progress struct {
	mu   sync.Mutex
	out  io.Writer
	tty  bool
	line string // the status line on screen, to redraw after an event
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// clearLine returns the cursor to the line's start and erases it (ANSI).
const clearLine = "\r\033[2K"

// event prints one line that stays.
func (p *progress) event(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	if p.tty && p.line != "" {
		fmt.Fprint(p.out, clearLine+msg+"\n"+p.line)
		return
	}
	fmt.Fprintln(p.out, msg)
}

// status shows the current status line.
func (p *progress) status(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.line = line
		fmt.Fprint(p.out, clearLine+line)
		return
	}
	fmt.Fprintln(p.out, line)
}

// done leaves the status line on screen and moves below it.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.line != "" {
		fmt.Fprintln(p.out)
	}
	p.line = ""
}

// statusLine renders a metrics line for a person.
func statusLine(m *Metrics, running, total int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] env steps %s  %s/s  episodes %s", formatElapsed(m.ElapsedS),
		si(float64(m.EnvSteps)), si(m.StepsPerS), si(float64(m.Episodes)))
	if m.MeanReturn != nil {
		fmt.Fprintf(&b, "  return %.1f", *m.MeanReturn)
	}
	if m.Version != nil {
		fmt.Fprintf(&b, "  version %d", *m.Version)
	}
	if m.PolicyLag != nil {
		fmt.Fprintf(&b, "  lag %.2f", *m.PolicyLag)
	}
	if m.DroppedShare != nil {
		fmt.Fprintf(&b, "  dropped %.1f%%", 100**m.DroppedShare)
	}
	if m.ReplaySize != nil {
		fmt.Fprintf(&b, "  replay %s", si(float64(*m.ReplaySize)))
	}
	if m.SamplesPerInsert != nil {
		fmt.Fprintf(&b, "  samples/insert %.2f", *m.SamplesPerInsert)
	}
	fmt.Fprintf(&b, "  workers %d/%d running", running, total)
	if m.Restarts > 0 {
		fmt.Fprintf(&b, "  restarts %d", m.Restarts)
	}
	return b.String()
}

func formatElapsed(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// si writes v with a k/M/G suffix: 1234567 -> "1.23M".
func si(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// quietable is a slog.Handler that can be silenced: the embedded etcd
// logs its listeners' "use of closed network connection" as errors when
// it is closed, which at the end of a trial is just noise.
type quietable struct {
	slog.Handler
	quiet *atomic.Bool
}

func (q quietable) Enabled(ctx context.Context, l slog.Level) bool {
	return !q.quiet.Load() && q.Handler.Enabled(ctx, l)
}

func (q quietable) WithAttrs(as []slog.Attr) slog.Handler {
	return quietable{Handler: q.Handler.WithAttrs(as), quiet: q.quiet}
}

func (q quietable) WithGroup(name string) slog.Handler {
	return quietable{Handler: q.Handler.WithGroup(name), quiet: q.quiet}
}
