//go:build race

package minatar

// raceEnabled reports whether the race detector is on: it slows the games
// about tenfold, so TestConformance plays fewer episodes under it.
const raceEnabled = true
