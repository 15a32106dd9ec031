package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/env/minatar"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// BenchmarkMinAtarCurves trains MinAtar built-in experiments through
// `rlctl start` for a fixed number of frames (env steps) each and sets
// their learning curves next to the paper's (minatar_paper_test.go): a
// table, a CSV of return against frames and a plot per game, in
// MINATAR_OUT. It runs hours at the paper's 5M frames, so it runs only
// when MINATAR_BENCH=1 (`make bench-minatar`); `make bench` skips it.
//
// Environment:
//
//	MINATAR_BENCH=1      run at all
//	MINATAR_FRAMES       frames per experiment (default 5000000, the paper's)
//	MINATAR_EXPERIMENTS  comma-separated experiment names; default every
//	                     minatar-<game>-<algo> that
//	                     `rlctl experiments` lists, in the paper's game order
//	MINATAR_WALL         a wall-time limit per experiment (stop.wall_time;
//	                     default none: the frame budget alone stops it)
//	MINATAR_SEEDS        comma-separated seeds, a run of each experiment
//	                     per seed (the trial's seed; default 0, the
//	                     built-in's own); with more than one the table adds
//	                     each experiment's mean, lowest and highest
//	MINATAR_OUT          where the outputs go (default ../bin/minatar,
//	                     bin/minatar of the repository)
//	MINATAR_REPLOT=1     train nothing: rewrite the table, CSV and plots
//	                     from the <experiment>.metrics.jsonl kept in
//	                     MINATAR_OUT by an earlier run
//
// Each experiment's own stop conditions (a target return, a wall time)
// are overridden so that every run covers the same frames. Per experiment
// it reports return (an estimate of the mean of its last 100 training
// episodes: tailReturn), frames, wall-s (from every worker running to the
// end; start-up excluded, as the reference's would be) and frames/s.
func BenchmarkMinAtarCurves(b *testing.B) {
	if os.Getenv("MINATAR_BENCH") != "1" {
		b.Skip("hours of training: set MINATAR_BENCH=1 (make bench-minatar)")
	}
	frames := int64(5_000_000)
	if s := os.Getenv("MINATAR_FRAMES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("MINATAR_FRAMES=%q: want a positive integer", s)
		}
		frames = n
	}
	var wall time.Duration
	if s := os.Getenv("MINATAR_WALL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			b.Fatalf("MINATAR_WALL=%q: want a duration such as 2h", s)
		}
		wall = d
	}
	out := os.Getenv("MINATAR_OUT")
	if out == "" {
		out = filepath.Join("..", "bin", "minatar")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	// Replotting redraws the outputs from the metrics kept by an earlier
	// run (after a correction of the paper's table, say), training nothing.
	replot := os.Getenv("MINATAR_REPLOT") == "1"
	exps := minatarExperiments(b)
	if len(exps) == 0 {
		b.Skip("no minatar-<game>-<algo> experiment in `rlctl experiments`; name some with MINATAR_EXPERIMENTS")
	}
	seeds, err := parseSeeds(os.Getenv("MINATAR_SEEDS"))
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("MinAtar curves: %d frames each, seeds %v: %s; outputs in %s\n", frames, seeds, strings.Join(exps, ", "), out)

	var runs []curveRun
	for _, exp := range exps {
		for _, seed := range seeds {
			name := "experiment=" + exp
			if len(seeds) > 1 {
				name += fmt.Sprintf(",seed=%d", seed)
			}
			b.Run(name, func(b *testing.B) {
				var r curveRun
				var ok bool
				if replot {
					r, ok = keptCurve(b, exp, seed, keptMetrics(out, exp, seed))
				} else {
					r, ok = runCurve(b, exp, seed, frames, wall, out)
				}
				if !ok {
					return
				}
				runs = append(runs, r)
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(r.tail, "return")
				b.ReportMetric(float64(r.frames), "frames")
				b.ReportMetric(r.wallS, "wall-s")
				b.ReportMetric(float64(r.frames)/r.wallS, "frames/s")
			})
		}
	}
	if len(runs) == 0 {
		return
	}
	table := summaryTable(runs)
	// On stdout: a parent benchmark's log is not printed once it has
	// sub-benchmarks.
	fmt.Printf("\nMinAtar learning curves against the paper (%s):\n%s", out, table)
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			b.Error(err)
		}
	}
	write("summary.md", []byte(table))
	write("curves.csv", curvesCSV(runs))
	for game, rs := range byGame(runs) {
		if err := plotGame(filepath.Join(out, game+".png"), game, rs); err != nil {
			b.Error(err)
		}
	}
}

// curveRun is one experiment's run.
type curveRun struct {
	exp, game, algo string
	seed            int64
	lines           []metricsLine
	frames          int64   // env steps at the end (a little past the budget)
	tail            float64 // tailReturn at the end
	tailEpisodes    int64   // episodes tail covers
	wallS           float64 // seconds from every worker running to the end
}

// minatarExp is a MinAtar built-in's name, minatar-<game>-<algorithm>,
// or a variant of one that scripts/minatar-sweep.sh trained:
// minatar-<game>-<algorithm>.<variant>.
var minatarExp = regexp.MustCompile(`^minatar-([a-z_]+)-([a-z]+)(?:\.[a-z0-9._-]+)?$`)

// minatarExperiments is MINATAR_EXPERIMENTS, or else every MinAtar
// built-in `rlctl experiments` lists, in the paper's game order: taken
// from the binary under test, so the benchmark runs whichever exist.
func minatarExperiments(b *testing.B) []string {
	if s := os.Getenv("MINATAR_EXPERIMENTS"); s != "" {
		var exps []string
		for e := range strings.SplitSeq(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				exps = append(exps, e)
			}
		}
		return exps
	}
	listing, err := exec.Command(rlctl, "experiments").Output()
	if err != nil {
		b.Fatalf("rlctl experiments: %v", err)
	}
	return pickMinAtar(string(listing))
}

// pickMinAtar picks the MinAtar built-ins from `rlctl experiments`'s
// table (the name is each line's first field), games in the paper's
// order, algorithms by name within a game.
func pickMinAtar(listing string) []string {
	var exps []string
	sc := bufio.NewScanner(strings.NewReader(listing))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			if m := minatarExp.FindStringSubmatch(f[0]); m != nil && slices.Contains(minatar.Games(), m[1]) {
				exps = append(exps, f[0])
			}
		}
	}
	games := minatar.Games()
	slices.SortFunc(exps, func(x, y string) int {
		gx, _ := gameAlgo(x)
		gy, _ := gameAlgo(y)
		if d := slices.Index(games, gx) - slices.Index(games, gy); d != 0 {
			return d
		}
		return strings.Compare(x, y)
	})
	return exps
}

// gameAlgo splits a MinAtar built-in's name; game is "" for any other
// experiment (one run to try the harness: it has no paper figures).
func gameAlgo(exp string) (game, algo string) {
	if m := minatarExp.FindStringSubmatch(exp); m != nil && slices.Contains(minatar.Games(), m[1]) {
		return m[1], m[2]
	}
	return "", exp
}

// parseSeeds reads MINATAR_SEEDS: "" is the built-ins' own seed, 0.
func parseSeeds(s string) ([]int64, error) {
	if strings.TrimSpace(s) == "" {
		return []int64{0}, nil
	}
	var seeds []int64
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("MINATAR_SEEDS=%q: want comma-separated seeds >= 0, such as 0,1,2", s)
		}
		if slices.Contains(seeds, n) {
			return nil, fmt.Errorf("MINATAR_SEEDS=%q: seed %d twice", s, n)
		}
		seeds = append(seeds, n)
	}
	return seeds, nil
}

// runCurve runs exp with the given seed for frames env steps and keeps a
// copy of its metrics.jsonl in out; ok is false if the run failed
// (reported).
func runCurve(b *testing.B, exp string, seed, frames int64, wall time.Duration, out string) (curveRun, bool) {
	work := b.TempDir()
	args := []string{"start", exp, "curve", "--workdir", work,
		"--set", fmt.Sprintf("stop.env_steps=%d", frames),
		// Every run covers the same frames: no early stop at a target.
		"--set", "stop.target_return=null",
		"--set", "stop.wall_time=" + wall.String(),
		"--set", fmt.Sprintf("seed=%d", seed)}
	p := start(b, "rlctl-start-"+exp, noNameServer, args...)
	limit := 72 * time.Hour
	if wall > 0 {
		limit = wall + 10*time.Minute
	}
	if code := p.wait(b, limit); code != 0 {
		b.Errorf("%s exited with %d:\n%s", exp, code, readFile(b, p.log))
		return curveRun{}, false
	}
	path := filepath.Join(work, exp, "curve", "metrics.jsonl")
	if data, err := os.ReadFile(path); err == nil {
		_ = os.WriteFile(keptMetrics(out, exp, seed), data, 0o644)
	}
	return keptCurve(b, exp, seed, path)
}

// keptMetrics is where runCurve keeps the metrics.jsonl of exp's run with
// seed in out, and where MINATAR_REPLOT=1 reads it back:
// <exp>.metrics.jsonl for seed 0, <exp>.seed<N>.metrics.jsonl for others.
func keptMetrics(out, exp string, seed int64) string {
	if seed != 0 {
		exp += fmt.Sprintf(".seed%d", seed)
	}
	return filepath.Join(out, exp+".metrics.jsonl")
}

// keptCurve reads the run of exp with seed from its metrics.jsonl at path.
func keptCurve(b *testing.B, exp string, seed int64, path string) (curveRun, bool) {
	lines := readMetricsLines(b, path)
	if len(lines) == 0 {
		b.Errorf("%s: no metrics in %s", exp, path)
		return curveRun{}, false
	}
	last := lines[len(lines)-1]
	game, algo := gameAlgo(exp)
	r := curveRun{exp: exp, game: game, algo: algo, seed: seed, lines: lines, frames: last.EnvSteps, wallS: last.ElapsedS}
	r.tail, r.tailEpisodes = tailReturn(lines, tailEpisodes)
	b.Logf("%s (seed %d): %d frames in %.0f s (%.0f frames/s), return %.2f over %d episodes",
		exp, seed, r.frames, r.wallS, float64(r.frames)/r.wallS, r.tail, r.tailEpisodes)
	return r, true
}

// tailEpisodes is how many final training episodes the paper's protocol
// averages.
const tailEpisodes = 100

// tailReturn estimates the mean return of the last n episodes of lines.
// Each metrics line holds only the mean of the latest ReturnEpisodes (20)
// episodes, so it averages, weighted by their episodes, the lines whose
// windows do not overlap, walking back from the last line: it takes a
// line, then the next one at least its window's episodes earlier, until
// the windows hold n episodes. Lines farther apart than a window leave
// episodes out, so the result is the mean of n of the last episodes
// rather than of exactly the last n; covered says how many it holds
// (fewer than n when the run had fewer).
func tailReturn(lines []metricsLine, n int64) (mean float64, covered int64) {
	var sum float64
	next := int64(math.MaxInt64) // the newest episode count a window may reach
	for i := len(lines) - 1; i >= 0 && covered < n; i-- {
		l := lines[i]
		if l.ReturnEpisodes <= 0 || l.Episodes > next {
			continue
		}
		sum += l.MeanReturn * float64(l.ReturnEpisodes)
		covered += l.ReturnEpisodes
		next = l.Episodes - l.ReturnEpisodes
	}
	if covered == 0 {
		return math.NaN(), 0
	}
	return sum / float64(covered), covered
}

// returnAt is tailReturn of the run up to the first line at or past
// frames; NaN if the run stopped before it.
func returnAt(lines []metricsLine, frames int64) float64 {
	i := slices.IndexFunc(lines, func(l metricsLine) bool { return l.EnvSteps >= frames })
	if i < 0 {
		return math.NaN()
	}
	m, _ := tailReturn(lines[:i+1], tailEpisodes)
	return m
}

// checkpoints are the frames at which curves.csv compares a run with the
// paper: the paper's points the run reached, then the run's end unless
// that is a last point the run just overshot (it stops a metrics line
// past its budget).
func checkpoints(game string, end int64) []int64 {
	var fs []int64
	for _, p := range minatarPaper[game].DQN {
		if p.Frames <= end {
			fs = append(fs, p.Frames)
		}
	}
	if len(fs) > 0 && float64(end) <= 1.02*float64(fs[len(fs)-1]) {
		return fs
	}
	return append(fs, end)
}

// algoNames spells out the built-ins' algorithm suffixes.
var algoNames = map[string]string{"ppo": "PPO", "apex": "Ape-X DQN"}

func algoName(algo string) string {
	if n, ok := algoNames[algo]; ok {
		return n
	}
	return algo
}

// num formats a table cell; NaN (no figure) is a dash.
func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// paperCell is the paper's return at frames on curve, or NaN.
func paperCell(points []paperPoint, frames int64) float64 {
	if v, ok := paperAt(points, frames); ok {
		return v
	}
	return math.NaN()
}

// summaryTable is the markdown table of each run at its end and, for an
// experiment run with several seeds, a row of their mean with the lowest
// and highest return.
func summaryTable(runs []curveRun) string {
	var w strings.Builder
	w.WriteString("| game | experiment | algorithm | seed | frames | return (last ~100 episodes) | paper DQN | paper AC(λ) | ours / DQN | wall s | frames/s | reference DQN wall s (est.) |\n")
	w.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(r curveRun, seed, ret string) {
		dqn, ac := paperFinal(r.game, r.frames)
		fmt.Fprintf(&w, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %.0f | %.0f | %.0f |\n",
			orDash(r.game), r.exp, algoName(r.algo), seed, r.frames, ret,
			num(dqn), num(ac), num(r.tail/dqn), r.wallS, float64(r.frames)/r.wallS,
			(time.Duration(r.frames) * referenceDQNPerFrame).Seconds())
	}
	for _, r := range runs {
		row(r, strconv.FormatInt(r.seed, 10), fmt.Sprintf("%s (%d ep)", num(r.tail), r.tailEpisodes))
	}
	for _, group := range bySeeds(runs) {
		if len(group) < 2 {
			continue
		}
		m := group[0]
		lo, hi := math.Inf(1), math.Inf(-1)
		var sumTail, sumWall float64
		var sumFrames int64
		for _, r := range group {
			sumTail, sumWall, sumFrames = sumTail+r.tail, sumWall+r.wallS, sumFrames+r.frames
			lo, hi = min(lo, r.tail), max(hi, r.tail)
		}
		n := float64(len(group))
		m.tail, m.wallS, m.frames = sumTail/n, sumWall/n, sumFrames/int64(len(group))
		row(m, fmt.Sprintf("mean of %d", len(group)), fmt.Sprintf("%s (%s to %s)", num(m.tail), num(lo), num(hi)))
	}
	return w.String()
}

// paperFinal is the paper's DQN and AC(λ) returns at frames; past its
// last point (5M frames), that point: the one to beat.
func paperFinal(game string, frames int64) (dqn, ac float64) {
	pc := minatarPaper[game]
	dqn, ac = paperCell(pc.DQN, frames), paperCell(pc.AC, frames)
	if math.IsNaN(dqn) && len(pc.DQN) > 0 && frames > pc.DQN[len(pc.DQN)-1].Frames {
		dqn, ac = pc.DQN[len(pc.DQN)-1].Return, pc.AC[len(pc.AC)-1].Return
	}
	return dqn, ac
}

// bySeeds groups the runs of each experiment (its seeds), in the order
// the experiments first appear.
func bySeeds(runs []curveRun) [][]curveRun {
	var groups [][]curveRun
	at := map[string]int{}
	for _, r := range runs {
		i, ok := at[r.exp]
		if !ok {
			i = len(groups)
			at[r.exp] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// curvesCSV is every run's return at its checkpoints next to the paper's.
func curvesCSV(runs []curveRun) []byte {
	var w bytes.Buffer
	w.WriteString("game,experiment,algorithm,seed,frames,return,paper_dqn,paper_ac\n")
	csvNum := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	for _, r := range runs {
		pc := minatarPaper[r.game]
		for _, f := range checkpoints(r.game, r.frames) {
			fmt.Fprintf(&w, "%s,%s,%s,%d,%d,%s,%s,%s\n", r.game, r.exp, algoName(r.algo), r.seed, f,
				csvNum(returnAt(r.lines, f)), csvNum(paperCell(pc.DQN, f)), csvNum(paperCell(pc.AC, f)))
		}
	}
	return w.Bytes()
}

// byGame groups runs by game; runs of other experiments go under their
// own name, so that each still gets a plot.
func byGame(runs []curveRun) map[string][]curveRun {
	m := map[string][]curveRun{}
	for _, r := range runs {
		key := r.game
		if key == "" {
			key = r.exp
		}
		m[key] = append(m[key], r)
	}
	return m
}

// maxPlotPoints caps the points of one run's line: a 5M-frame run writes
// thousands of metrics lines, more than a plot's width shows.
const maxPlotPoints = 400

// plotGame writes one game's plot: each run's mean return (the metrics
// lines' last-20-episode mean) against frames, and the paper's DQN and
// AC(λ) points, joined by dashed lines.
func plotGame(path, game string, runs []curveRun) error {
	p := plot.New()
	p.Title.Text = game + ": return vs frames"
	if _, ok := minatarPaper[game]; ok {
		p.Title.Text = "MinAtar " + game + ": return vs frames; paper: Young & Tian 2019 (recollected, ±30%)"
	}
	p.X.Label.Text = "frames (env steps)"
	p.Y.Label.Text = "mean training return"
	// The legend goes bottom right (gonum's default), where rising curves
	// leave room.
	p.Add(plotter.NewGrid())
	for i, r := range runs {
		var xys plotter.XYs
		step := max(1, len(r.lines)/maxPlotPoints)
		for j := 0; j < len(r.lines); j += step {
			if l := r.lines[j]; l.ReturnEpisodes > 0 {
				xys = append(xys, plotter.XY{X: float64(l.EnvSteps), Y: l.MeanReturn})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", r.exp, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%s), seed %d", r.exp, algoName(r.algo), r.seed), line)
	}
	// The paper's points up to the runs' end and one past it: the whole
	// 5M-frame curve would squeeze a shorter run into the left edge.
	var end int64
	for _, r := range runs {
		end = max(end, r.frames)
	}
	upTo := func(pts []paperPoint) []paperPoint {
		i := slices.IndexFunc(pts, func(p paperPoint) bool { return p.Frames >= end })
		if i < 0 {
			return pts
		}
		return pts[:i+1]
	}
	pc := minatarPaper[game]
	for k, c := range []struct {
		name   string
		points []paperPoint
	}{{"paper DQN", upTo(pc.DQN)}, {"paper AC(λ=0.8)", upTo(pc.AC)}} {
		if len(c.points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(c.points))
		for j, pt := range c.points {
			xys[j] = plotter.XY{X: float64(pt.Frames), Y: pt.Return}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", c.name, err)
		}
		col := color.Gray{Y: uint8(60 + 80*k)}
		line.Color, points.Color = col, col
		line.Dashes = plotutil.Dashes(1 + k)
		points.Shape = plotutil.Shape(k)
		points.Radius = vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(c.name, line, points)
	}
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
}
