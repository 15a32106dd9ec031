package e2e

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/distrl/distrl/env/minatar"
)

// The pieces of BenchmarkMinAtarCurves that need no training run.

func TestPaperAt(t *testing.T) {
	pts := []paperPoint{{1_000, 2}, {2_000, 4}, {4_000, 4}}
	for _, c := range []struct {
		frames int64
		want   float64
		ok     bool
	}{
		{999, 0, false}, // before the first point: not read off the figure
		{1_000, 2, true},
		{1_500, 3, true},
		{2_000, 4, true},
		{3_000, 4, true},
		{4_000, 4, true},
		{4_001, 0, false}, // past the last: no extrapolation
	} {
		got, ok := paperAt(pts, c.frames)
		if ok != c.ok || (ok && math.Abs(got-c.want) > 1e-12) {
			t.Errorf("paperAt(%d) = %v, %v; want %v, %v", c.frames, got, ok, c.want, c.ok)
		}
	}
	if _, ok := paperAt(nil, 0); ok {
		t.Error("paperAt of no points is ok")
	}
	if got, ok := paperAt([]paperPoint{{5, 7}}, 5); !ok || got != 7 {
		t.Errorf("paperAt of a single point at it = %v, %v; want 7, true", got, ok)
	}
}

// TestMinAtarPaperCurves checks the paper's digitized curves as the
// loader reads them from testdata/minatar_paper_curves.csv: every game
// env/minatar has, the four algorithms of 20 points each (0.25M to 5M
// frames), values at 5M as the digitization's at5M.md tabulates them,
// which AC curve each game compares with and the paper's best.
func TestMinAtarPaperCurves(t *testing.T) {
	if len(minatarPaper) != len(minatar.Games()) {
		t.Errorf("paper curves for %d games, env/minatar has %d", len(minatarPaper), len(minatar.Games()))
	}
	for _, g := range minatar.Games() {
		c, ok := minatarPaper[g]
		if !ok {
			t.Errorf("no paper curves for %s", g)
			continue
		}
		if len(c) != len(paperAlgorithms) {
			t.Errorf("%s: %d curves, want %d", g, len(c), len(paperAlgorithms))
		}
		for _, a := range paperAlgorithms {
			pts := c[a]
			if len(pts) != 20 {
				t.Errorf("%s %s: %d points, want 20", g, a, len(pts))
				continue
			}
			for i, p := range pts {
				if want := int64(i+1) * 250_000; p.Frames != want {
					t.Errorf("%s %s: point %d at %d frames, want %d", g, a, i, p.Frames, want)
				}
			}
		}
	}
	for _, c := range []struct {
		game, algo string
		at5M       float64
	}{
		// at5M.md's table, to its two decimals.
		{"seaquest", paperDQN, 20.14},
		{"seaquest", paperDQNNoReplay, 0.41},
		{"breakout", paperAC08, 17.61},
		{"asterix", paperAC0, 20.36},
		{"freeway", paperDQN, 50.24},
		{"freeway", paperAC08, 47.47},
		{"space_invaders", paperAC08, 184.66},
		{"space_invaders", paperAC0, 144.40},
	} {
		got, ok := paperAt(minatarPaper[c.game][c.algo], paperEnd)
		if !ok || math.Abs(got-c.at5M) > 0.005 {
			t.Errorf("%s %s at 5M = %v, %v; want %.2f", c.game, c.algo, got, ok, c.at5M)
		}
	}
	for _, c := range []struct {
		game, bestAC string
		bestACAt5M   float64
		best         string
		bestAt5M     float64
	}{
		{"seaquest", paperAC08, 15.37, paperDQN, 20.14},
		{"breakout", paperAC08, 17.61, paperAC08, 17.61},
		{"asterix", paperAC0, 20.36, paperAC0, 20.36},
		{"freeway", paperAC08, 47.47, paperDQN, 50.24},
		{"space_invaders", paperAC08, 184.66, paperAC08, 184.66},
	} {
		pc := minatarPaper[c.game]
		if got := pc.bestAC(); got != c.bestAC || math.Abs(pc.final(got)-c.bestACAt5M) > 0.005 {
			t.Errorf("%s: best AC %s (%v at 5M); want %s (%.2f)", c.game, got, pc.final(got), c.bestAC, c.bestACAt5M)
		}
		if algo, ret := pc.best(); algo != c.best || math.Abs(ret-c.bestAt5M) > 0.005 {
			t.Errorf("%s: paper's best %s %v; want %s %.2f", c.game, algo, ret, c.best, c.bestAt5M)
		}
	}
	// Interpolation on the real curves: halfway between two points, and
	// nothing before the first digitized one (0.25M).
	pts := minatarPaper["breakout"][paperDQN]
	mid, ok := paperAt(pts, 4_875_000)
	if want := (pts[18].Return + pts[19].Return) / 2; !ok || math.Abs(mid-want) > 1e-9 {
		t.Errorf("breakout DQN at 4.875M = %v, %v; want %v", mid, ok, want)
	}
	if _, ok := paperAt(pts, 200_000); ok {
		t.Error("breakout DQN at 0.2M, before the first digitized point, is ok")
	}
	if _, ok := paperAt(pts, paperEnd+1); ok {
		t.Error("breakout DQN past 5M is ok")
	}
}

// TestParsePaperCurves holds the loader to its format: names mapped to
// env/minatar's, and malformed files refused.
func TestParsePaperCurves(t *testing.T) {
	const header = "game,algorithm,frames_millions,return\n"
	m, err := parsePaperCurves(strings.NewReader(header +
		"space invaders,DQN,0.25,1.5\nspace invaders,DQN,0.5,2.5\nspace invaders,AC(0),0.25,3\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]paperCurve{"space_invaders": {
		paperDQN: {{250_000, 1.5}, {500_000, 2.5}},
		paperAC0: {{250_000, 3}},
	}}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("parsePaperCurves = %v; want %v", m, want)
	}
	for _, c := range []struct{ name, in string }{
		{"no header", "seaquest,DQN,0.25,1\n"},
		{"wrong header", "game,algo,frames,return\n"},
		{"unknown algorithm", header + "seaquest,PPO,0.25,1\n"},
		{"bad frames", header + "seaquest,DQN,x,1\n"},
		{"zero frames", header + "seaquest,DQN,0,1\n"},
		{"bad return", header + "seaquest,DQN,0.25,NaN\n"},
		{"frames not increasing", header + "seaquest,DQN,0.5,1\nseaquest,DQN,0.25,1\n"},
		{"short row", header + "seaquest,DQN,0.25\n"},
	} {
		if _, err := parsePaperCurves(strings.NewReader(c.in)); err == nil {
			t.Errorf("%s: parsePaperCurves accepted %q", c.name, c.in)
		}
	}
}

func TestTailReturn(t *testing.T) {
	line := func(episodes, window int64, ret float64) metricsLine {
		return metricsLine{Episodes: episodes, ReturnEpisodes: window, MeanReturn: ret}
	}
	for _, c := range []struct {
		name        string
		lines       []metricsLine
		n           int64
		want        float64
		wantCovered int64
	}{
		{"no episode yet", []metricsLine{line(0, 0, 0)}, 100, math.NaN(), 0},
		{"one window", []metricsLine{line(0, 0, 0), line(20, 20, 3)}, 100, 3, 20},
		{
			// Overlapping windows (the lines at 110 and 100 share episodes
			// with the one at 120) are skipped.
			"disjoint windows only",
			[]metricsLine{line(80, 20, 1), line(100, 20, 2), line(110, 20, 9), line(120, 20, 4)},
			100, (4 + 2 + 1) / 3.0, 60,
		},
		{
			"stops at n",
			[]metricsLine{line(20, 20, 100), line(40, 20, 1), line(60, 20, 2), line(80, 20, 3)},
			40, 2.5, 40,
		},
		{
			// A short first window (fewer episodes than 20 so far) counts
			// for what it holds.
			"weighted by episodes",
			[]metricsLine{line(5, 5, 10), line(25, 20, 0)},
			100, 2, 25,
		},
	} {
		got, covered := tailReturn(c.lines, c.n)
		if covered != c.wantCovered || !(math.Abs(got-c.want) < 1e-12 || math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%s: tailReturn = %v over %d; want %v over %d", c.name, got, covered, c.want, c.wantCovered)
		}
	}
}

func TestReturnAt(t *testing.T) {
	lines := []metricsLine{
		{EnvSteps: 100, Episodes: 20, ReturnEpisodes: 20, MeanReturn: 1},
		{EnvSteps: 200, Episodes: 40, ReturnEpisodes: 20, MeanReturn: 3},
		{EnvSteps: 300, Episodes: 60, ReturnEpisodes: 20, MeanReturn: 5},
	}
	for _, c := range []struct {
		frames int64
		want   float64
	}{{50, 1}, {150, 2}, {200, 2}, {300, 3}, {301, math.NaN()}} {
		got := returnAt(lines, c.frames)
		if !(got == c.want || math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("returnAt(%d) = %v; want %v", c.frames, got, c.want)
		}
	}
}

func TestPickMinAtar(t *testing.T) {
	listing := `EXPERIMENT              WORKERS                   DESCRIPTION
cartpole-ppo            1 trainer, 1 policy       PPO on CartPole-v1
minatar-seaquest-apex   1 replay, 1 trainer       Ape-X DQN on MinAtar Seaquest
minatar-breakout-ppo    1 trainer, 1 policy       PPO on MinAtar Breakout
minatar-breakout-apex   1 replay, 1 trainer       Ape-X DQN on MinAtar Breakout
minatar-pong-ppo        1 trainer                 not a MinAtar game
minatar-asterix-ppo     1 trainer, 1 policy       PPO on MinAtar Asterix
`
	got := pickMinAtar(listing)
	want := []string{"minatar-asterix-ppo", "minatar-breakout-apex", "minatar-breakout-ppo", "minatar-seaquest-apex"}
	if !slices.Equal(got, want) {
		t.Errorf("pickMinAtar = %v; want %v", got, want)
	}
	if got := pickMinAtar("EXPERIMENT WORKERS DESCRIPTION\ncartpole-ppo x y\n"); len(got) != 0 {
		t.Errorf("pickMinAtar without MinAtar built-ins = %v", got)
	}
}

func TestGameAlgo(t *testing.T) {
	for _, c := range []struct{ exp, game, algo string }{
		{"minatar-space_invaders-ppo", "space_invaders", "ppo"},
		{"minatar-breakout-apex", "breakout", "apex"},
		{"minatar-asterix-ppo.lr1e-3.anneal", "asterix", "ppo"}, // a variant scripts/minatar-sweep.sh trained
		{"minatar-asterix-ppo.", "", "minatar-asterix-ppo."},
		{"cartpole-ppo", "", "cartpole-ppo"},
		{"minatar-pong-ppo", "", "minatar-pong-ppo"},
	} {
		if g, a := gameAlgo(c.exp); g != c.game || a != c.algo {
			t.Errorf("gameAlgo(%q) = %q, %q; want %q, %q", c.exp, g, a, c.game, c.algo)
		}
	}
}

func TestCheckpoints(t *testing.T) {
	if got, want := checkpoints("breakout", 1_200_000), []int64{250_000, 500_000, 750_000, 1_000_000, 1_200_000}; !slices.Equal(got, want) {
		t.Errorf("checkpoints(breakout, 1.2M) = %v; want %v", got, want)
	}
	got := checkpoints("breakout", 5_004_038)
	if len(got) != 20 || got[0] != 250_000 || got[19] != paperEnd {
		t.Errorf("checkpoints(breakout, just past 5M) = %v; want every 0.25M to 5M", got)
	}
	if got, want := checkpoints("", 30_000), []int64{30_000}; !slices.Equal(got, want) {
		t.Errorf("checkpoints of a non-MinAtar run = %v; want %v", got, want)
	}
}

// TestCurveOutputs writes the table, the CSV and a plot from made-up
// metrics lines, as the benchmark does after its runs.
func TestCurveOutputs(t *testing.T) {
	// Breakout gets curves of its own, so that corrections of the
	// digitized ones leave this test alone; it lacks DQN without replay,
	// and its AC(0.8) ends higher than its AC(0) and its DQN.
	saved := minatarPaper["breakout"]
	minatarPaper["breakout"] = paperCurve{
		paperDQN:  {{1_000_000, 5}, {2_000_000, 7}, {3_000_000, 9}, {5_000_000, 10}},
		paperAC08: {{1_000_000, 4}, {2_000_000, 8}, {3_000_000, 12}, {5_000_000, 15}},
		paperAC0:  {{1_000_000, 3}, {5_000_000, 14}},
	}
	t.Cleanup(func() { minatarPaper["breakout"] = saved })
	// 5M frames: a metrics line every 20k frames and 25 episodes.
	var lines []metricsLine
	for i := int64(1); i <= 250; i++ {
		lines = append(lines, metricsLine{EnvSteps: i * 20_000, Episodes: i * 25, ReturnEpisodes: 20,
			MeanReturn: float64(i) / 16, ElapsedS: float64(i)})
	}
	// A second seed whose returns are half the first's.
	half := slices.Clone(lines)
	for i := range half {
		half[i].MeanReturn /= 2
	}
	runs := []curveRun{
		{exp: "minatar-breakout-ppo", game: "breakout", algo: "ppo", lines: lines, frames: 5_000_000, wallS: 250},
		{exp: "cartpole-ppo", algo: "cartpole-ppo", lines: lines[:3], frames: 60_000, wallS: 3},
		{exp: "minatar-seaquest-ppo", game: "seaquest", algo: "ppo", lines: lines[:60], frames: 1_200_000, wallS: 60},
		{exp: "minatar-breakout-ppo", game: "breakout", algo: "ppo", seed: 7, lines: half, frames: 5_000_000, wallS: 500},
		{exp: "minatar-breakout-apex", game: "breakout", algo: "apex", lines: lines, frames: 5_000_000, wallS: 1000},
	}
	for i := range runs {
		runs[i].tail, runs[i].tailEpisodes = tailReturn(runs[i].lines, tailEpisodes)
	}
	table := summaryTable(runs)
	for _, want := range []string{
		"| game | curve | seed | 1M | 2M | 3M | 5M | frames | return at the end (last ~100 episodes) | ours / paper's best at 5M |",
		"| breakout | DQN (paper, digitized) | mean of 30 | 5.0 | 7.0 | 9.0 | 10.0 | 5000000 | - | - | - | - | - |\n" +
			"| breakout | AC(0.8) (paper, digitized) | mean of 30 | 4.0 | 8.0 | 12.0 | 15.0 | 5000000 | - | - | - | - | - |\n" +
			"| breakout | minatar-breakout-ppo (PPO) | 0 | 3.0 | 6.1 | 9.2 | 15.5 | 5000000 | 15.5 (100 ep) | 1.03 | 250 | 20000 | 40000 |\n",
		"| breakout | minatar-breakout-ppo (PPO) | 7 | 1.5 | 3.1 | 4.6 | 7.8 | 5000000 | 7.8 (100 ep) | 0.52 | 500 | 10000 | 40000 |\n" +
			"| breakout | minatar-breakout-apex (Ape-X DQN) | 0 | 3.0 | 6.1 | 9.2 | 15.5 | 5000000 | 15.5 (100 ep) | 1.03 | 1000 | 5000 | 40000 |\n" +
			// The mean of the two seeds: (15.5 + 7.75) / 2, 375 s on average.
			"| breakout | minatar-breakout-ppo (PPO) | mean of 2 | 2.2 | 4.6 | 6.9 | 11.6 | 5000000 | 11.6 (7.8 to 15.5) | 0.78 | 375 | 13333 | 40000 |\n",
		"| - | cartpole-ppo (cartpole-ppo) | 0 | - | - | - | - | 60000 | 0.1 (60 ep) | - | 3 | 20000 | 480 |",
		// Seaquest's are the real digitized curves: at5M.md's DQN 0.97,
		// 4.92, 12.94 and 20.14, and AC(0.8) 0.77, 2.13, 6.25 and 15.37.
		"| seaquest | DQN (paper, digitized) | mean of 30 | 1.0 | 4.9 | 12.9 | 20.1 | 5000000 | - | - | - | - | - |\n" +
			"| seaquest | AC(0.8) (paper, digitized) | mean of 30 | 0.8 | 2.1 | 6.3 | 15.4 | 5000000 | - | - | - | - | - |\n" +
			"| seaquest | minatar-seaquest-ppo (PPO) | 0 | 3.0 | - | - | - | 1200000 | 3.6 (100 ep) | - | 60 | 20000 | 9600 |\n",
		"- breakout: at or above the paper's best, AC(0.8) 15.0 at 5M frames (paper, digitized; DQN 10.0, AC(0.8) 15.0): " +
			"minatar-breakout-ppo (PPO), mean of 2 seeds 11.6 (0.78x); minatar-breakout-apex (Ape-X DQN) 15.5 (1.03x)\n",
		"- seaquest: not compared (no run reached 5M frames), DQN 20.1 at 5M frames (paper, digitized; DQN 20.1, AC(0.8) 15.4): " +
			"minatar-seaquest-ppo (PPO) stopped at 1200000 frames, not compared\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary table lacks %q:\n%s", want, table)
		}
	}
	csv := string(curvesCSV(runs))
	for _, want := range []string{
		"game,experiment,algorithm,seed,frames,return,paper_dqn,paper_dqn_without_replay,paper_ac_lambda0.8,paper_ac_lambda0\n",
		// At breakout's own points (AC(0)'s interpolated between 1M and
		// 5M); no DQN without replay.
		"breakout,minatar-breakout-ppo,PPO,0,2000000,6.125,7.000,,8.000,5.750\n",
		"breakout,minatar-breakout-ppo,PPO,7,5000000,7.750,10.000,,15.000,14.000\n",
		// Every 0.25M of the real curves, then the run's end between two.
		"seaquest,minatar-seaquest-ppo,PPO,0,250000,0.688,0.741,0.331,0.525,0.430\n",
		"seaquest,minatar-seaquest-ppo,PPO,0,1200000,3.625,1.211,0.364,0.848,0.788\n",
		",cartpole-ppo,cartpole-ppo,0,60000,0.125,,,,\n",
	} {
		if !strings.Contains(csv, want) {
			t.Errorf("curves.csv lacks %q:\n%s", want, csv)
		}
	}
	dir := t.TempDir()
	for game, rs := range byGame(runs) {
		path := filepath.Join(dir, game+".png")
		if err := plotGame(path, game, rs); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(data)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	for _, name := range []string{"breakout.png", "seaquest.png", "cartpole-ppo.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int64
		ok   bool
	}{
		{"", []int64{0}, true},
		{"3", []int64{3}, true},
		{"0, 1,2", []int64{0, 1, 2}, true},
		{"1,1", nil, false},
		{"-1", nil, false},
		{"one", nil, false},
		{"1,", nil, false},
	} {
		got, err := parseSeeds(c.in)
		if (err == nil) != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("parseSeeds(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestKeptMetricsNames(t *testing.T) {
	for seed, want := range map[int64]string{0: "out/minatar-breakout-ppo.metrics.jsonl", 2: "out/minatar-breakout-ppo.seed2.metrics.jsonl"} {
		if got := keptMetrics("out", "minatar-breakout-ppo", seed); got != want {
			t.Errorf("keptMetrics(seed %d) = %s, want %s", seed, got, want)
		}
	}
}
