package actorworker

import "testing"

func TestBatchEndAfter(t *testing.T) {
	const steps = 5
	cases := []struct {
		name        string
		term, trunc bool
		length      int
		want        batchEnd
	}{
		{"mid-episode, batch not full", false, false, 3, keepFilling},
		{"mid-episode, batch full: cut, bootstrap from the next value", false, false, steps, awaitBootstrap},
		{"past full (never happens, still cut)", false, false, steps + 1, awaitBootstrap},
		{"terminated: send with bootstrap 0", true, false, 3, sendNow},
		{"terminated on a full batch: still 0", true, false, steps, sendNow},
		{"truncated: bootstrap from the final observation", false, true, 3, awaitBootstrap},
		{"truncated on a full batch", false, true, steps, awaitBootstrap},
		{"terminated and truncated: termination wins", true, true, 1, sendNow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := batchEndAfter(c.term, c.trunc, c.length, steps); got != c.want {
				t.Errorf("batchEndAfter(term=%v, trunc=%v, len=%d, %d) = %v, want %v",
					c.term, c.trunc, c.length, steps, got, c.want)
			}
		})
	}
}
