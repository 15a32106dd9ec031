package eventually

import (
	"errors"
	"testing"
	"time"
)

// The pause between checks starts short, so a test waits little past the
// moment a cheap condition holds, and doubles up to a ceiling, so that an
// expensive one (a request, a process) does not load a 2-core machine.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// NoError checks cond until it returns nil. If it still fails after
// timeout, the test fails naming what and cond's last error.
func NoError(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := firstPause; ; pause = min(2*pause, maxPause) {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(pause)
	}
}

var errFalse = errors.New("condition still false")

// True is NoError for a condition that only says whether it holds.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	NoError(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
}
