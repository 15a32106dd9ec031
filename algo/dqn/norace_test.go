//go:build !race

package dqn_test

// raceEnabled: under the race detector the learning run is skipped (the
// same code runs race-free in the unit tests; learning takes minutes there).
const raceEnabled = false
