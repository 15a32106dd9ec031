package dashboard

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/distrl/distrl/controller"
)

// history follows a metrics.jsonl as it grows: each refresh reads only
// the lines added since the last (the offset is remembered), so a long
// trial costs what its new lines cost.
type history struct {
	path string

	mu     sync.Mutex
	off    int64  // bytes consumed: whole lines only
	runKey string // the run the points belong to (see refresh)
	run    int
	points []Point
}

// maxLine bounds one line (a trial of thousands of workers writes long
// ones); a longer line is skipped, not held.
const maxLine = 64 << 20

// refresh reads the lines added since the last refresh. runKey names the
// run of the trial that writes the file (its controller's start): a new
// run truncates the file and starts over, and so do the points.
func (h *history) refresh(runKey string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := os.Open(h.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if runKey != h.runKey || fi.Size() < h.off {
		h.runKey, h.off, h.points = runKey, 0, nil
		h.run++
	}
	if fi.Size() == h.off {
		return nil
	}
	if _, err := f.Seek(h.off, io.SeekStart); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	r := bufio.NewReaderSize(io.LimitReader(f, fi.Size()-h.off), 64<<10)
	var line []byte
	var n int64 // bytes of the current line, kept or not
	for {
		chunk, err := r.ReadSlice('\n')
		n += int64(len(chunk))
		if len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		} else {
			line = append(line[:0], 0) // too long: consumed, skipped
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			// A last line without its newline is being written: it is
			// read whole next time.
			return nil
		}
		h.off += n
		var m controller.Metrics
		if json.Unmarshal(line, &m) == nil {
			h.points = append(h.points, pointOf(&m))
		}
		line, n = line[:0], 0
	}
}

func pointOf(m *controller.Metrics) Point {
	return Point{
		Time: float64(m.Time.UnixMilli()) / 1e3, ElapsedS: m.ElapsedS, EnvSteps: m.EnvSteps, Episodes: m.Episodes,
		StepsPerS: m.StepsPerS, MeanReturn: m.MeanReturn, PolicyLag: m.PolicyLag, DroppedShare: m.DroppedShare, Version: m.Version,
		BestReturn: m.BestReturn, BestVersion: m.BestVersion,
	}
}

// since returns up to limit points from index i on.
func (h *history) since(i, limit int) History {
	h.mu.Lock()
	defer h.mu.Unlock()
	i = min(max(i, 0), len(h.points))
	end := min(i+limit, len(h.points))
	// Never nil: a client reads [] where null would break it.
	return History{Run: h.run, Since: i, Next: end, Total: len(h.points), Points: append([]Point{}, h.points[i:end]...)}
}

// last is the newest point, nil before the first.
func (h *history) last() *Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.points) == 0 {
		return nil
	}
	p := h.points[len(h.points)-1]
	return &p
}
