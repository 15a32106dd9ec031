package stream

import "testing"

func TestRequests(t *testing.T) {
	tests := []struct {
		name    string
		add     int     // ids 1..add
		remove  []ReqID // in this order
		wantLen int
		wantWin int // window length after the removals
	}{
		{"in order", 4, []ReqID{1, 2, 3, 4}, 0, 0},
		{"out of order", 4, []ReqID{3, 1, 4}, 1, 3}, // 2 stays: the window is [2, -, -]
		{"newest first", 4, []ReqID{4, 3, 2}, 1, 4}, // 1 pins the front
		{"twice", 2, []ReqID{1, 1, 9}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q requests
			for id := ReqID(1); id <= ReqID(tt.add); id++ {
				q.add(id, request{state: reqQueued})
			}
			for _, id := range tt.remove {
				q.remove(id)
				if q.at(id) != nil {
					t.Fatalf("request %d still there after remove", id)
				}
			}
			if q.len() != tt.wantLen || len(q.win) != tt.wantWin {
				t.Fatalf("%d requests in a window of %d, want %d in %d", q.len(), len(q.win), tt.wantLen, tt.wantWin)
			}
		})
	}
}

// TestRequestsUnconsumed: a request nobody consumes does not make the
// window grow with every later id; it moves to the map and stays there,
// readable and writable, until removed.
func TestRequestsUnconsumed(t *testing.T) {
	var q requests
	q.add(1, request{state: reqSent})
	for id := ReqID(2); id < 100_000; id++ {
		q.add(id, request{state: reqQueued})
		r := q.at(id)
		if r == nil || r.state != reqQueued {
			t.Fatalf("request %d: %+v", id, r)
		}
		r.state = reqDone
		if !q.settled(id) {
			t.Fatalf("request %d: a change in place did not stick", id)
		}
		q.remove(id)
	}
	if len(q.win) > 2048 || q.len() != 1 {
		t.Fatalf("window of %d for %d requests", len(q.win), q.len())
	}
	r := q.at(1)
	if r == nil || r.state != reqSent {
		t.Fatalf("the unconsumed request: %+v", r)
	}
	r.state = reqFailed
	if r := q.at(1); r.state != reqFailed {
		t.Fatalf("a change in place of a request in the map did not stick: %+v", r)
	}
	q.remove(1)
	if q.at(1) != nil || q.len() != 0 {
		t.Fatalf("request 1 after remove: %d held", q.len())
	}
}
