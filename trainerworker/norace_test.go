//go:build !race

package trainerworker_test

// raceEnabled reports whether the race detector is on; it slows the
// numeric code about fourfold, so the learning test sets a lower bar.
const raceEnabled = false
