package minatar

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/distrl/distrl/api"
)

// The original games' statistics that TestConformance measures here too:
// kenjyoung/MinAtar at commit 4241f24 (v1.0.15) through its Environment
// class, sticky actions 0.1, all six actions, ramping on; the mean return
// with its standard error over the number of episodes given. The source is
// the project's reference data (shared/reference/minatar-paper/README.md,
// "The original games, measured").
type originalStat struct {
	mean, stderr float64
	episodes     int
}

var originalRandom = map[string]originalStat{
	"asterix":        {0.487, 0.006, 20000},
	"breakout":       {0.500, 0.010, 5000},
	"freeway":        {0.147, 0.012, 1000},
	"seaquest":       {0.0995, 0.0027, 20000},
	"space_invaders": {2.857, 0.033, 5000},
}

var originalScripted = map[string]originalStat{
	"asterix":        {0.494, 0.019, 2000},
	"breakout":       {8.61, 0.21, 2000},
	"freeway":        {17.36, 0.41, 1000},
	"seaquest":       {0.465, 0.010, 5000},
	"space_invaders": {3.000, 0.000, 2000},
}

// originalSeaquestDensity is the enemy cells (fish and submarines) on
// screen per step in the original's Seaquest, staying at the surface doing
// nothing for 3000 steps, over 100 episodes.
var originalSeaquestDensity = originalStat{2.58, 0.01, 100}

// policy picks an action of the full set from an observation.
type policy func(obs []float32, channels int, rng *rand.Rand) int32

func uniform(_ []float32, _ int, rng *rand.Rand) int32 { return int32(rng.IntN(int(NumActions))) }

// find returns the row and column of the first cell set in channel ch.
func find(obs []float32, channels, ch int) (row, col int, ok bool) {
	for i := ch; i < len(obs); i += channels {
		if obs[i] != 0 {
			cell := i / channels
			return cell / Size, cell % Size, true
		}
	}
	return 0, 0, false
}

// scripted are the reference's simple policies, each reading only the
// observation: Breakout's paddle follows the ball's column, Freeway's
// chicken always goes up, Seaquest's submarine dives one row and then
// fires until it dies, Asterix's player does nothing, Space Invaders' cannon
// always fires.
var scripted = map[string]func() policy{
	"breakout": func() policy {
		return func(obs []float32, c int, _ *rand.Rand) int32 {
			_, ball, okB := find(obs, c, boBall)
			_, paddle, okP := find(obs, c, boPaddle)
			switch {
			case !okB || !okP || ball == paddle:
				return Noop
			case ball < paddle:
				return Left
			default:
				return Right
			}
		}
	},
	"freeway": func() policy { return func([]float32, int, *rand.Rand) int32 { return Up } },
	// Down until under water (a sticky step can cancel the first press),
	// then fire.
	"seaquest": func() policy {
		return func(obs []float32, c int, _ *rand.Rand) int32 {
			if row, _, _ := find(obs, c, sqSubFront); row == 0 {
				return Down
			}
			return Fire
		}
	},
	"asterix":        func() policy { return func([]float32, int, *rand.Rand) int32 { return Noop } },
	"space_invaders": func() policy { return func([]float32, int, *rand.Rand) int32 { return Fire } },
}

// meanSE is a sample's mean and the standard error of the mean.
type meanSE struct{ mean, stderr float64 }

func summarize(xs []float64) meanSE {
	var sum, sumSq float64
	for _, x := range xs {
		sum += x
		sumSq += x * x
	}
	n := float64(len(xs))
	mean := sum / n
	return meanSE{mean, math.Sqrt(max(0, sumSq/n-mean*mean) / (n - 1))}
}

// episodeReturns plays episodes of a game under the paper's settings with
// a fresh policy per episode (from newPolicy) and returns each episode's
// return and the mean episode length.
func episodeReturns(t testing.TB, name string, episodes int, newPolicy func() policy, seed uint64) ([]float64, float64) {
	e := newEnv(t, name, DefaultOptions())
	rng := rand.New(rand.NewPCG(seed, 3176))
	actions := make([]api.Action, 1)
	returns := make([]float64, episodes)
	steps := 0
	c := len(e.spec.channels)
	for ep := range episodes {
		o, err := e.Reset(int64(seed)<<32 | int64(ep))
		if err != nil {
			t.Fatal(err)
		}
		obs := o[0]
		pi := newPolicy()
		for n := 0; ; n++ {
			if n == maxConformanceSteps {
				t.Fatalf("%s: episode %d still running after %d steps", name, ep, n)
			}
			actions[0].Discrete = pi(obs, c, rng)
			s, err := e.Step(actions)
			if err != nil {
				t.Fatal(err)
			}
			returns[ep] += float64(s.Rewards[0])
			steps++
			if s.Done() {
				break
			}
			obs = s.Obs[0]
		}
	}
	return returns, float64(steps) / float64(episodes)
}

// maxConformanceSteps bounds an episode of TestConformance: every policy
// there ends its episodes (Freeway's in 2501 steps, the others' in a few
// hundred), so one that runs on is a bug, not a long game.
const maxConformanceSteps = 100_000

// agrees reports whether ours and the original's means are within three
// combined standard errors. Two exact figures (both errors zero) must be
// equal.
func agrees(ours meanSE, orig originalStat) (bool, float64) {
	se := math.Hypot(ours.stderr, orig.stderr)
	d := math.Abs(ours.mean - orig.mean)
	if se == 0 {
		if d == 0 {
			return true, 0
		}
		return false, math.Inf(1)
	}
	return d <= 3*se, d / se
}

// conformanceEpisodes scales the reference's episode counts down under
// -short and the race detector, where the games run 10x slower; the
// comparison's standard error grows to match.
func conformanceEpisodes(n int) int {
	if testing.Short() || raceEnabled {
		return max(100, n/10)
	}
	return n
}

// TestConformance plays every game as the reference measured the
// original: a uniform random policy and a scripted one, as many episodes,
// and Seaquest's enemy density at the surface. Each figure must agree with
// the original's within three combined standard errors. The seeds are
// fixed, so a run's outcome is the same every time; a game whose rules
// drift from the original's moves its figures by many standard errors
// (Breakout's ball one row lower: random 0.76 against 0.50, 20 errors).
func TestConformance(t *testing.T) {
	for _, name := range Games() {
		for _, kind := range []string{"random", "scripted"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				orig, newPolicy := originalRandom[name], func() policy { return uniform }
				if kind == "scripted" {
					orig, newPolicy = originalScripted[name], scripted[name]
				}
				returns, length := episodeReturns(t, name, conformanceEpisodes(orig.episodes), newPolicy, 2019)
				ours := summarize(returns)
				ok, z := agrees(ours, orig)
				t.Logf("%s %s: %.4f ± %.4f over %d episodes (%.1f steps each); original %.4f ± %.4f (%d): %.1f combined standard errors apart",
					name, kind, ours.mean, ours.stderr, len(returns), length, orig.mean, orig.stderr, orig.episodes, z)
				if !ok {
					t.Errorf("%s under the %s policy returns %.4f ± %.4f, the original %.4f ± %.4f: %.1f combined standard errors apart, want at most 3",
						name, kind, ours.mean, ours.stderr, orig.mean, orig.stderr, z)
				}
			})
		}
	}
	t.Run("seaquest/density", func(t *testing.T) {
		t.Parallel()
		ours := seaquestDensity(t, conformanceEpisodes(originalSeaquestDensity.episodes), 3000)
		orig := originalSeaquestDensity
		ok, z := agrees(ours, orig)
		t.Logf("seaquest enemy cells per step at the surface: %.3f ± %.3f; original %.3f ± %.3f: %.1f combined standard errors apart", ours.mean, ours.stderr, orig.mean, orig.stderr, z)
		if !ok {
			t.Errorf("seaquest enemy density %.3f ± %.3f, the original %.3f ± %.3f: %.1f combined standard errors apart, want at most 3",
				ours.mean, ours.stderr, orig.mean, orig.stderr, z)
		}
	})
}

// seaquestDensity stays at the surface doing nothing for steps steps per
// episode (nothing reaches the surface, and the sea keeps its starting
// difficulty) and returns the mean number of enemy cells, fish and
// submarines, on screen per step, one sample per episode.
func seaquestDensity(t testing.TB, episodes, steps int) meanSE {
	e := newEnv(t, "seaquest", DefaultOptions())
	c := len(e.spec.channels)
	noop := []api.Action{{Discrete: Noop}}
	perEpisode := make([]float64, episodes)
	for ep := range episodes {
		if _, err := e.Reset(int64(ep)); err != nil {
			t.Fatal(err)
		}
		cells := 0
		for range steps {
			s, err := e.Step(noop)
			if err != nil {
				t.Fatal(err)
			}
			if s.Done() {
				t.Fatalf("episode %d ended at the surface", ep)
			}
			for i := 0; i < len(s.Obs[0]); i += c {
				if s.Obs[0][i+sqEnemyFish] != 0 {
					cells++
				}
				if s.Obs[0][i+sqEnemySub] != 0 {
					cells++
				}
			}
		}
		perEpisode[ep] = float64(cells) / float64(steps)
	}
	return summarize(perEpisode)
}
