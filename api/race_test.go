//go:build race

package api

// raceEnabled reports whether the race detector is on: it makes sync.Pool
// drop items at random, so allocation counts do not hold.
const raceEnabled = true
