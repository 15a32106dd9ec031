//go:build race

package ppo

// raceEnabled reports whether the race detector is on, under which
// TestLearnCartPole runs fewer seeds.
const raceEnabled = true
