package actorworker

import "testing"

func TestBatchEndAfter(t *testing.T) {
	const steps = 5
	cases := []struct {
		name        string
		term, trunc bool
		length      int
		span        bool // span_episodes
		want        batchEnd
	}{
		{"mid-episode, batch not full", false, false, 3, false, keepFilling},
		{"mid-episode, batch full: cut, bootstrap from the next value", false, false, steps, false, awaitBootstrap},
		{"past full (never happens, still cut)", false, false, steps + 1, false, awaitBootstrap},
		{"terminated: send with bootstrap 0", true, false, 3, false, sendNow},
		{"terminated on a full batch: still 0", true, false, steps, false, sendNow},
		{"truncated: bootstrap from the final observation", false, true, 3, false, awaitBootstrap},
		{"truncated on a full batch", false, true, steps, false, awaitBootstrap},
		{"terminated and truncated: termination wins", true, true, 1, false, sendNow},
		{"spanning: terminated, the next episode goes on in the batch", true, false, 3, true, keepFilling},
		{"spanning: terminated on a full batch, bootstrap 0", true, false, steps, true, sendNow},
		{"spanning: terminated and truncated", true, true, 1, true, keepFilling},
		{"spanning: truncated", false, true, 3, true, awaitBootstrap},
		{"spanning: mid-episode, batch full", false, false, steps, true, awaitBootstrap},
		{"spanning: mid-episode, not full", false, false, 3, true, keepFilling},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := batchEndAfter(c.term, c.trunc, c.length, steps, c.span); got != c.want {
				t.Errorf("batchEndAfter(term=%v, trunc=%v, len=%d, %d, span=%v) = %v, want %v",
					c.term, c.trunc, c.length, steps, c.span, got, c.want)
			}
		})
	}
}
