package e2e

import (
	"bytes"
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

// TestMinAtarPaperTable holds the reference table to the games and to
// increasing frames, which paperAt's interpolation assumes.
func TestMinAtarPaperTable(t *testing.T) {
	for _, g := range minatar.Games() {
		c, ok := minatarPaper[g]
		if !ok {
			t.Errorf("no paper curves for %s", g)
			continue
		}
		for name, pts := range map[string][]paperPoint{"DQN": c.DQN, "AC": c.AC} {
			if len(pts) == 0 || pts[len(pts)-1].Frames != 5_000_000 {
				t.Errorf("%s %s: want points up to the paper's 5M frames, got %v", g, name, pts)
			}
			if !slices.IsSortedFunc(pts, func(a, b paperPoint) int { return int(a.Frames - b.Frames) }) {
				t.Errorf("%s %s: frames not increasing: %v", g, name, pts)
			}
		}
	}
	if len(minatarPaper) != len(minatar.Games()) {
		t.Errorf("paper table has %d games, env/minatar %d", len(minatarPaper), len(minatar.Games()))
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
	if got, want := checkpoints("breakout", 1_200_000), []int64{500_000, 1_000_000, 1_200_000}; !slices.Equal(got, want) {
		t.Errorf("checkpoints(breakout, 1.2M) = %v; want %v", got, want)
	}
	if got, want := checkpoints("breakout", 5_004_038), []int64{500_000, 1_000_000, 2_000_000, 3_000_000, 5_000_000}; !slices.Equal(got, want) {
		t.Errorf("checkpoints(breakout, just past 5M) = %v; want %v", got, want)
	}
	if got, want := checkpoints("", 30_000), []int64{30_000}; !slices.Equal(got, want) {
		t.Errorf("checkpoints of a non-MinAtar run = %v; want %v", got, want)
	}
}

// TestCurveOutputs writes the table, the CSV and a plot from made-up
// metrics lines, as the benchmark does after its runs.
func TestCurveOutputs(t *testing.T) {
	// Curves of its own, so that corrections of the paper's read-offs
	// leave this test alone.
	saved := minatarPaper["breakout"]
	minatarPaper["breakout"] = paperCurve{
		DQN: []paperPoint{{500_000, 5}, {1_000_000, 7}, {2_000_000, 10}},
		AC:  []paperPoint{{500_000, 4}, {1_000_000, 6}, {2_000_000, 9}},
	}
	t.Cleanup(func() { minatarPaper["breakout"] = saved })
	var lines []metricsLine
	for i := int64(1); i <= 60; i++ {
		lines = append(lines, metricsLine{EnvSteps: i * 20_000, Episodes: i * 25, ReturnEpisodes: 20,
			MeanReturn: float64(i) / 4, ElapsedS: float64(i)})
	}
	// A second seed whose returns are half the first's.
	half := slices.Clone(lines)
	for i := range half {
		half[i].MeanReturn /= 2
	}
	runs := []curveRun{
		{exp: "minatar-breakout-ppo", game: "breakout", algo: "ppo", lines: lines, frames: 1_200_000, wallS: 60},
		{exp: "cartpole-ppo", algo: "cartpole-ppo", lines: lines[:3], frames: 60_000, wallS: 3},
		{exp: "minatar-breakout-ppo", game: "breakout", algo: "ppo", seed: 7, lines: half, frames: 1_200_000, wallS: 80},
	}
	for i := range runs {
		runs[i].tail, runs[i].tailEpisodes = tailReturn(runs[i].lines, tailEpisodes)
	}
	table := summaryTable(runs)
	for _, want := range []string{
		"| breakout | minatar-breakout-ppo | PPO | 0 | 1200000 | 14.5 (100 ep) | 7.6 | 6.6 | 1.9 | 60 | 20000 | 9600 |",
		"| - | cartpole-ppo | cartpole-ppo | 0 | 60000 | 0.5 (60 ep) | - | - | - | 3 | 20000 | 480 |",
		"| breakout | minatar-breakout-ppo | PPO | 7 | 1200000 | 7.2 (100 ep) | 7.6 | 6.6 | 1.0 | 80 | 15000 | 9600 |",
		// The mean of the two seeds: (14.5 + 7.25) / 2, 70 s on average.
		"| breakout | minatar-breakout-ppo | PPO | mean of 2 | 1200000 | 10.9 (7.2 to 14.5) | 7.6 | 6.6 | 1.4 | 70 | 17143 | 9600 |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary table lacks %q:\n%s", want, table)
		}
	}
	csv := string(curvesCSV(runs))
	for _, want := range []string{
		"game,experiment,algorithm,seed,frames,return,paper_dqn,paper_ac\n",
		"breakout,minatar-breakout-ppo,PPO,0,500000,5.750,5.000,4.000\n",
		"breakout,minatar-breakout-ppo,PPO,7,500000,2.875,5.000,4.000\n",
		",cartpole-ppo,cartpole-ppo,0,60000,0.500,,\n",
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
	if _, err := os.Stat(filepath.Join(dir, "breakout.png")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cartpole-ppo.png")); err != nil {
		t.Error(err)
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
