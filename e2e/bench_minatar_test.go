package e2e

import (
	"bufio"
	"bytes"
	"errors"
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
// their learning curves next to the paper's, digitized from its figure
// (minatar_paper_test.go): a table at 1M, 2M, 3M and 5M frames with the
// paper's DQN and best AC curve, a verdict per game against the paper's
// best at 5M, a CSV of return against frames and a plot per game, in
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
	// run (after a correction of the paper's curves, say), training nothing.
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
					// A seed that was never run has nothing kept: the
					// table leaves it out, the other seeds still count.
					kept := keptMetrics(out, exp, seed)
					if _, err := os.Stat(kept); errors.Is(err, os.ErrNotExist) {
						b.Skipf("%s (seed %d): no kept metrics at %s", exp, seed, kept)
					}
					r, ok = keptCurve(b, exp, seed, kept)
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
	fmt.Printf("\nMinAtar learning curves against the paper's, digitized (%s):\n%s", out, table)
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
// paper: the paper's digitized points the run reached (every 0.25M
// frames), then the run's end unless that is a last point the run just
// overshot (it stops a metrics line past its budget).
func checkpoints(game string, end int64) []int64 {
	var fs []int64
	for _, p := range minatarPaper[game][paperDQN] {
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

// tableFrames are the frame counts at which the summary table sets each
// run next to the paper's curves.
var tableFrames = []int64{1_000_000, 2_000_000, 3_000_000, paperEnd}

// paperSeeds is how many runs each of the paper's curves is the mean of.
const paperSeeds = 30

// summaryTable is the markdown table, game by game: the paper's DQN and
// best AC curve (the AC(lambda) that ends higher), then each run and, for
// an experiment run with several seeds, a row of their mean with the
// lowest and highest return; each at 1M, 2M, 3M and 5M frames, and at its
// end against the paper's best at 5M (the higher of DQN and the best AC).
// A line per game follows (gameVerdicts).
func summaryTable(runs []curveRun) string {
	var w strings.Builder
	w.WriteString("| game | curve | seed | 1M | 2M | 3M | 5M | frames | return at the end (last ~100 episodes) | ours / paper's best at 5M | wall s | frames/s | reference DQN wall s (est.) |\n")
	w.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	cells := func(at func(int64) float64) string {
		var c []string
		for _, f := range tableFrames {
			c = append(c, num(at(f)))
		}
		return strings.Join(c, " | ")
	}
	row := func(r curveRun, seed, ret string, at func(int64) float64, reached bool) {
		ratio := "-"
		if _, best := minatarPaper[r.game].best(); reached && !math.IsNaN(best) {
			ratio = strconv.FormatFloat(r.tail/best, 'f', 2, 64)
		}
		fmt.Fprintf(&w, "| %s | %s (%s) | %s | %s | %d | %s | %s | %.0f | %.0f | %.0f |\n",
			orDash(r.game), r.exp, algoName(r.algo), seed, cells(at), r.frames, ret, ratio,
			r.wallS, float64(r.frames)/r.wallS, (time.Duration(r.frames) * referenceDQNPerFrame).Seconds())
	}
	groups := byGame(runs)
	for _, key := range gameOrder(runs) {
		rs := groups[key]
		pc := minatarPaper[rs[0].game]
		for _, algo := range []string{paperDQN, pc.bestAC()} {
			pts := pc[algo]
			if len(pts) == 0 {
				continue
			}
			fmt.Fprintf(&w, "| %s | %s | mean of %d | %s | %d | - | - | - | - | - |\n", rs[0].game, paperCurveLabel(algo),
				paperSeeds, cells(func(f int64) float64 { return paperCell(pts, f) }), pts[len(pts)-1].Frames)
		}
		for _, r := range rs {
			row(r, strconv.FormatInt(r.seed, 10), fmt.Sprintf("%s (%d ep)", num(r.tail), r.tailEpisodes),
				func(f int64) float64 { return returnAt(r.lines, f) }, r.frames >= paperEnd)
		}
		for _, group := range bySeeds(rs) {
			if len(group) < 2 {
				continue
			}
			m, lo, hi, reached := seedMean(group)
			row(m, fmt.Sprintf("mean of %d", len(group)), fmt.Sprintf("%s (%s to %s)", num(m.tail), num(lo), num(hi)),
				func(f int64) float64 {
					var sum float64
					for _, r := range group {
						sum += returnAt(r.lines, f)
					}
					return sum / float64(len(group))
				}, reached)
		}
	}
	if v := gameVerdicts(runs); v != "" {
		w.WriteString("\n" + v)
	}
	return w.String()
}

// seedMean is the runs of one experiment (its seeds) as one: the mean of
// their returns at the end, wall times and frames; lo and hi are the
// lowest and highest return, and reached whether every run reached the
// paper's 5M frames.
func seedMean(group []curveRun) (m curveRun, lo, hi float64, reached bool) {
	m = group[0]
	lo, hi, reached = math.Inf(1), math.Inf(-1), true
	var sumTail, sumWall float64
	var sumFrames int64
	for _, r := range group {
		sumTail, sumWall, sumFrames = sumTail+r.tail, sumWall+r.wallS, sumFrames+r.frames
		lo, hi = min(lo, r.tail), max(hi, r.tail)
		reached = reached && r.frames >= paperEnd
	}
	n := float64(len(group))
	m.tail, m.wallS, m.frames = sumTail/n, sumWall/n, sumFrames/int64(len(group))
	return m, lo, hi, reached
}

// gameVerdicts says, per MinAtar game, whether our experiments end at or
// above the paper's best at 5M frames: each experiment's return at its end
// (the mean over its seeds) against the higher of the paper's DQN and best
// AC there. An experiment that stopped short of 5M frames is not compared.
func gameVerdicts(runs []curveRun) string {
	var w strings.Builder
	groups := byGame(runs)
	for _, key := range gameOrder(runs) {
		rs := groups[key]
		pc, ok := minatarPaper[rs[0].game]
		if !ok {
			continue
		}
		algo, best := pc.best()
		var parts []string
		compared, above := false, false
		for _, group := range bySeeds(rs) {
			m, _, _, reached := seedMean(group)
			name := fmt.Sprintf("%s (%s)", m.exp, algoName(m.algo))
			if len(group) > 1 {
				name += fmt.Sprintf(", mean of %d seeds", len(group))
			}
			if !reached {
				parts = append(parts, fmt.Sprintf("%s stopped at %d frames, not compared", name, m.frames))
				continue
			}
			compared = true
			above = above || m.tail >= best
			parts = append(parts, fmt.Sprintf("%s %s (%.2fx)", name, num(m.tail), m.tail/best))
		}
		verdict := "not compared (no run reached 5M frames)"
		switch {
		case compared && above:
			verdict = "at or above the paper's best"
		case compared:
			verdict = "below the paper's best"
		}
		fmt.Fprintf(&w, "- %s: %s, %s %s at 5M frames (paper, digitized; DQN %s, %s %s): %s\n", rs[0].game, verdict,
			algo, num(best), num(pc.final(paperDQN)), pc.bestAC(), num(pc.final(pc.bestAC())), strings.Join(parts, "; "))
	}
	if w.Len() == 0 {
		return ""
	}
	return "Per game, against the paper's best at 5M frames (the higher of its DQN and best AC):\n" + w.String()
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

// paperCSVColumns name curves.csv's columns of the paper's curves, in
// paperAlgorithms' order.
var paperCSVColumns = []string{"paper_dqn", "paper_dqn_without_replay", "paper_ac_lambda0.8", "paper_ac_lambda0"}

// curvesCSV is every run's return at its checkpoints next to the paper's
// four digitized curves.
func curvesCSV(runs []curveRun) []byte {
	var w bytes.Buffer
	w.WriteString("game,experiment,algorithm,seed,frames,return," + strings.Join(paperCSVColumns, ",") + "\n")
	csvNum := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	for _, r := range runs {
		pc := minatarPaper[r.game]
		for _, f := range checkpoints(r.game, r.frames) {
			fmt.Fprintf(&w, "%s,%s,%s,%d,%d,%s", r.game, r.exp, algoName(r.algo), r.seed, f, csvNum(returnAt(r.lines, f)))
			for _, algo := range paperAlgorithms {
				fmt.Fprintf(&w, ",%s", csvNum(paperCell(pc[algo], f)))
			}
			w.WriteString("\n")
		}
	}
	return w.Bytes()
}

// byGame groups runs by game; runs of other experiments go under their
// own name, so that each still gets a plot.
func byGame(runs []curveRun) map[string][]curveRun {
	m := map[string][]curveRun{}
	for _, r := range runs {
		m[gameKey(r)] = append(m[gameKey(r)], r)
	}
	return m
}

// gameKey is the run's key in byGame.
func gameKey(r curveRun) string {
	if r.game == "" {
		return r.exp
	}
	return r.game
}

// gameOrder is byGame's keys in the order they first appear in runs.
func gameOrder(runs []curveRun) []string {
	var keys []string
	for _, r := range runs {
		if !slices.Contains(keys, gameKey(r)) {
			keys = append(keys, gameKey(r))
		}
	}
	return keys
}

// maxPlotPoints caps the points of one run's line: a 5M-frame run writes
// thousands of metrics lines, more than a plot's width shows.
const maxPlotPoints = 400

// plotGame writes one game's plot: each run's mean return (the metrics
// lines' last-20-episode mean) against frames, and the paper's digitized
// curves, dashed: DQN and the best AC (the one that ends higher) dark,
// with a mark at each digitized point; the other two light and thin.
func plotGame(path, game string, runs []curveRun) error {
	p := plot.New()
	p.Title.Text = game + ": return vs frames"
	pc, isMinAtar := minatarPaper[game]
	if isMinAtar {
		p.Title.Text = fmt.Sprintf("MinAtar %s: return vs frames; paper: Young & Tian 2019, digitized from its figure (mean of %d seeds)", game, paperSeeds)
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
	if !isMinAtar {
		return p.Save(10*vg.Inch, 6*vg.Inch, path)
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
	// The two compared curves first, so that they lead the paper's part
	// of the legend; the other two after them, drawn under them.
	bestAC := pc.bestAC()
	algos := []string{paperDQN, bestAC}
	for _, a := range paperAlgorithms {
		if !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	for k, algo := range algos {
		pts := upTo(pc[algo])
		if len(pts) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(pts))
		for j, pt := range pts {
			xys[j] = plotter.XY{X: float64(pt.Frames), Y: pt.Return}
		}
		compared := algo == paperDQN || algo == bestAC
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", algo, err)
		}
		line.Dashes = plotutil.Dashes(1 + k)
		if !compared {
			line.Color = color.Gray{Y: 190}
			line.Width = vg.Points(0.75)
			p.Add(line)
			p.Legend.Add(paperCurveLabel(algo), line)
			continue
		}
		points, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", algo, err)
		}
		col := color.Gray{Y: uint8(40 + 70*k)}
		line.Color, points.Color = col, col
		line.Width = vg.Points(1.5)
		points.Shape = plotutil.Shape(k)
		points.Radius = vg.Points(2.5)
		p.Add(line, points)
		p.Legend.Add(paperCurveLabel(algo), line, points)
	}
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
}
