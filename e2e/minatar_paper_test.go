package e2e

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The published MinAtar learning curves that BenchmarkMinAtarCurves sets
// our own next to, as numbers in testdata/minatar_paper_curves.csv.
//
// The source is Young & Tian 2019, "MinAtar: An Atari-Inspired Testbed
// for Thorough and Reproducible Reinforcement Learning Experiments",
// arXiv:1903.03176, whose learning curves the kenjyoung/MinAtar
// repository's README ("Results") shows as one image,
// img/learning_curves.gif (at commit 4241f24): DQN (examples/dqn.py, with
// experience replay and a target network), DQN without replay, and the
// online actor-critic with eligibility traces (examples/AC_lambda.py) at
// lambda 0.8 and 0, on each of the five games. Each curve is the mean of
// 30 seeds; y is the moving average of the returns of the last 100
// training episodes (DQN's epsilon-greedy ones: epsilon annealed from 1
// to 0.1 over the first 100k frames after 5k random ones), x is frames
// from 0 to 5M. The protocol: the full six-action set, sticky actions
// 0.1, difficulty ramping on, one frame per action (no frame skip).
//
// Neither the paper nor the README prints the curves as numbers; the CSV
// was digitized from that image (a copy of curves.csv in the reference
// folder this project keeps, whose at5M.md tabulates it): the axes
// calibrated from the tick marks, each series told by its line colour
// (the shaded bands ignored), the median pixel row per column averaged
// over +-0.05M frames around each point from 0.25M to 5M frames, every
// 0.25M (over 4.90M to about 4.98M for the 5M point), and the result
// redrawn over the original and checked by eye. The reading error, per
// game, where a curve is visible (+-1 px) and where another is drawn over
// it (+-2.65 px, half a stroke; the draw order is DQN, DQN without
// replay, AC(0.8), AC(0), bottom to top): Seaquest +-0.05 / +-0.13,
// Breakout +-0.04 / +-0.11, Asterix +-0.05 / +-0.13, Freeway +-0.12 /
// +-0.32, Space Invaders +-0.45 / +-1.20. The hidden stretches include
// Freeway's AC(0.8) to 1.25M and again from 2.75M to 5M, and Seaquest's
// AC(0.8) to 1.5M (at5M.md lists them all).
//
// Seaquest's curves predate MinAtar v1.0.11's fix of the oxygen bar (they
// come from v1.0.10 or older; the README says results with later versions
// may differ): of the five, Seaquest's comparison is the loosest.

//go:embed testdata/minatar_paper_curves.csv
var minatarPaperCSV string

// paperPoint is one point of a published curve: the mean training return
// after Frames frames (env steps: MinAtar has no frame skip).
type paperPoint struct {
	Frames int64
	Return float64
}

// The figure's four algorithms, as the CSV names them, in its draw order.
const (
	paperDQN         = "DQN"
	paperDQNNoReplay = "DQN without replay"
	paperAC08        = "AC(0.8)"
	paperAC0         = "AC(0)"
)

// paperAlgorithms are the figure's curves in its draw order.
var paperAlgorithms = []string{paperDQN, paperDQNNoReplay, paperAC08, paperAC0}

// paperEnd is the figure's last frame count: the paper's budget.
const paperEnd = 5_000_000

// paperCurve is one game's published curves, by algorithm.
type paperCurve map[string][]paperPoint

// final is the last point's return of the algorithm's curve; NaN if the
// curve has no point.
func (c paperCurve) final(algo string) float64 {
	pts := c[algo]
	if len(pts) == 0 {
		return math.NaN()
	}
	return pts[len(pts)-1].Return
}

// bestAC is whichever of AC(0.8) and AC(0) ends higher (at 5M frames);
// "" if the game has neither.
func (c paperCurve) bestAC() string {
	best := ""
	for _, a := range []string{paperAC08, paperAC0} {
		if len(c[a]) > 0 && (best == "" || c.final(a) > c.final(best)) {
			best = a
		}
	}
	return best
}

// best is the paper's best at its last point (5M frames): the higher of
// DQN and the best AC there, and which one it is.
func (c paperCurve) best() (algo string, ret float64) {
	algo, ret = "", math.NaN()
	for _, a := range []string{paperDQN, c.bestAC()} {
		if v := c.final(a); a != "" && !math.IsNaN(v) && (algo == "" || v > ret) {
			algo, ret = a, v
		}
	}
	return algo, ret
}

// paperCurveLabel names a published curve in tables and legends.
func paperCurveLabel(algo string) string { return algo + " (paper, digitized)" }

// paperGameNames maps the CSV's games to env/minatar's names.
var paperGameNames = map[string]string{"space invaders": "space_invaders"}

// minatarPaper maps a game (as env/minatar names it) to its curves.
var minatarPaper = mustParsePaperCurves(minatarPaperCSV)

func mustParsePaperCurves(s string) map[string]paperCurve {
	m, err := parsePaperCurves(strings.NewReader(s))
	if err != nil {
		panic("testdata/minatar_paper_curves.csv: " + err.Error())
	}
	return m
}

// parsePaperCurves reads the digitized curves: a header
// game,algorithm,frames_millions,return and a row per point, a curve's
// points in increasing frames.
func parsePaperCurves(r io.Reader) (map[string]paperCurve, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || !slices.Equal(rows[0], []string{"game", "algorithm", "frames_millions", "return"}) {
		return nil, fmt.Errorf("want the header game,algorithm,frames_millions,return")
	}
	m := map[string]paperCurve{}
	for i, row := range rows[1:] {
		line := i + 2
		game, algo := row[0], row[1]
		if g, ok := paperGameNames[game]; ok {
			game = g
		}
		if !slices.Contains(paperAlgorithms, algo) {
			return nil, fmt.Errorf("line %d: unknown algorithm %q", line, algo)
		}
		millions, err := strconv.ParseFloat(row[2], 64)
		if err != nil || millions <= 0 {
			return nil, fmt.Errorf("line %d: frames_millions %q: want a positive number", line, row[2])
		}
		ret, err := strconv.ParseFloat(row[3], 64)
		if err != nil || math.IsNaN(ret) || math.IsInf(ret, 0) {
			return nil, fmt.Errorf("line %d: return %q: want a number", line, row[3])
		}
		c := m[game]
		if c == nil {
			c = paperCurve{}
			m[game] = c
		}
		pt := paperPoint{Frames: int64(math.Round(millions * 1e6)), Return: ret}
		if pts := c[algo]; len(pts) > 0 && pt.Frames <= pts[len(pts)-1].Frames {
			return nil, fmt.Errorf("line %d: %s %s: frames %d not after %d", line, game, algo, pt.Frames, pts[len(pts)-1].Frames)
		}
		c[algo] = append(c[algo], pt)
	}
	return m, nil
}

// referenceDQNPerFrame is what one frame costs the paper's reference DQN
// (examples/dqn.py, PyTorch, one update of a batch of 32 per frame) on a
// CPU: "about 5 ms per update on GPU (or 8 ms on CPU)", its author, Kenny
// Young, in kenjyoung/MinAtar issue #10 ("Speed of this repo",
// 2020-12-31). Neither the paper nor the README gives a wall time; the
// issue names no CPU model or core count, so this is an order of
// magnitude: 5M frames come to about 40,000 s (11 h) per game and run.
const referenceDQNPerFrame = 8 * time.Millisecond

// paperAt is the curve's return at frames, interpolated linearly between
// its points; ok is false outside the points' range: before the first
// (the digitized curves start at 0.25M frames, and the figure's smoothed
// curve says nothing of the return at 0) and past the last (5M frames).
func paperAt(points []paperPoint, frames int64) (ret float64, ok bool) {
	if len(points) == 0 || frames < points[0].Frames || frames > points[len(points)-1].Frames {
		return 0, false
	}
	for i := 1; i < len(points); i++ {
		a, b := points[i-1], points[i]
		if frames <= b.Frames {
			t := float64(frames-a.Frames) / float64(b.Frames-a.Frames)
			return a.Return + t*(b.Return-a.Return), true
		}
	}
	return points[0].Return, true // a single point, frames equal to it
}
