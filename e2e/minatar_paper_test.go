package e2e

import "time"

// The published MinAtar learning curves that BenchmarkMinAtarCurves sets
// our own next to. The source is Young & Tian 2019, "MinAtar: An
// Atari-Inspired Testbed for Thorough and Reproducible Reinforcement
// Learning Experiments", arXiv:1903.03176 (v2), whose learning-curve
// figure is also the lower half of img/learning_curves.gif in the
// kenjyoung/MinAtar repository's README ("Results"): the mean over 30
// runs of each agent at its best step size, return against training
// frames, 0 to 5M, one panel per game. The protocol: the full six-action
// set, sticky actions 0.1, difficulty ramping, one frame per action (no
// frame skip), the return of every training episode (epsilon-greedy,
// epsilon 0.1 after the first 100k frames, for DQN), smoothed over a
// window of episodes (examples/plot_return.py).
//
// Neither the paper nor the README prints these curves as numbers, and
// no later paper this project could reach tabulates the reference DQN at
// these frame counts. Worse, the figure itself could not be opened where
// this table was written (the tools there read text, not images): the
// values below are the writer's recollection of the plotted curves, not
// a read-off made with the figure in view. Treat each as +-30% (or +-2
// where that is wider), the intermediate points more loosely than the
// 5M ones, and correct them against the figure (or the authors' data)
// before quoting a ratio to them as a result. Seaquest's curves predate
// MinAtar v1.0.11's fix of the oxygen bar (the README says results with
// later versions may differ).
//
// DQN is the paper's DQN with experience replay and a target network
// (examples/dqn.py); AC is its online actor-critic with eligibility
// traces, lambda 0.8 (examples/AC_lambda.py), the better of the two
// lambdas it plots.

// paperPoint is one point of a published curve: the mean training return
// after Frames frames (env steps: MinAtar has no frame skip).
type paperPoint struct {
	Frames int64
	Return float64
}

// paperCurve is one game's published curves.
type paperCurve struct {
	DQN, AC []paperPoint
}

// minatarPaper maps a game (as env/minatar names it) to its curves, read
// off the learning-curve figure at 0.5M, 1M, 2M, 3M and 5M frames.
var minatarPaper = map[string]paperCurve{
	"asterix": {
		DQN: []paperPoint{{500_000, 3}, {1_000_000, 5}, {2_000_000, 9}, {3_000_000, 13}, {5_000_000, 20}},
		AC:  []paperPoint{{500_000, 2}, {1_000_000, 3}, {2_000_000, 5}, {3_000_000, 6}, {5_000_000, 8}},
	},
	"breakout": {
		DQN: []paperPoint{{500_000, 5}, {1_000_000, 7}, {2_000_000, 10}, {3_000_000, 12}, {5_000_000, 15}},
		AC:  []paperPoint{{500_000, 4}, {1_000_000, 6}, {2_000_000, 9}, {3_000_000, 10}, {5_000_000, 12}},
	},
	"freeway": {
		DQN: []paperPoint{{500_000, 20}, {1_000_000, 40}, {2_000_000, 50}, {3_000_000, 53}, {5_000_000, 55}},
		AC:  []paperPoint{{500_000, 5}, {1_000_000, 15}, {2_000_000, 25}, {3_000_000, 30}, {5_000_000, 35}},
	},
	"seaquest": {
		DQN: []paperPoint{{500_000, 1}, {1_000_000, 3}, {2_000_000, 8}, {3_000_000, 12}, {5_000_000, 20}},
		AC:  []paperPoint{{500_000, 1}, {1_000_000, 1}, {2_000_000, 2}, {3_000_000, 3}, {5_000_000, 5}},
	},
	"space_invaders": {
		DQN: []paperPoint{{500_000, 10}, {1_000_000, 20}, {2_000_000, 35}, {3_000_000, 45}, {5_000_000, 60}},
		AC:  []paperPoint{{500_000, 10}, {1_000_000, 15}, {2_000_000, 22}, {3_000_000, 28}, {5_000_000, 35}},
	},
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
// its points; ok is false outside the points' range, which the figure
// does not support reading (before its first point or past 5M frames).
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
