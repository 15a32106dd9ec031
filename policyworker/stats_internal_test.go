package policyworker

import (
	"testing"
	"time"
)

// TestQueueClock checks the bound of the arrival of the requests a poll
// takes over sequences of polls (each took rows of max_batch 8).
func TestQueueClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type poll struct {
		start, taken int // ms
		rows         int // 0: found none
		want         int // ms: the bound returned, for rows > 0
	}
	cases := []struct {
		name  string
		polls []poll
	}{
		{"first poll counts from its start", []poll{{start: 5, taken: 6, rows: 1, want: 5}}},
		{"after a poll that found none, from the start", []poll{
			{start: 0, taken: 1, rows: 2, want: 0}, {start: 2, taken: 2}, {start: 50, taken: 51, rows: 1, want: 50}}},
		{"a busy worker counts from the end of the last take that emptied the queues", []poll{
			{start: 0, taken: 1, rows: 2, want: 0}, {start: 4, taken: 5, rows: 3, want: 1}, {start: 9, taken: 10, rows: 1, want: 5}}},
		{"a full batch may leave requests behind: the bound stays", []poll{
			{start: 0, taken: 1, rows: 2, want: 0}, {start: 4, taken: 5, rows: 8, want: 1},
			{start: 9, taken: 10, rows: 8, want: 1}, {start: 14, taken: 15, rows: 3, want: 1}, {start: 19, taken: 20, rows: 1, want: 15}}},
		{"a full batch after sleeping counts from the wake-up", []poll{
			{start: 0, taken: 1, rows: 8, want: 0}, {start: 4, taken: 5, rows: 3, want: 0}, {start: 6, taken: 6},
			{start: 30, taken: 31, rows: 8, want: 30}, {start: 35, taken: 36, rows: 1, want: 30}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var q queueClock
			for i, p := range tc.polls {
				if p.rows == 0 {
					q.empty()
					continue
				}
				if got := q.took(at(p.start), at(p.taken), p.rows, 8); !got.Equal(at(p.want)) {
					t.Errorf("poll %d: bound %v ms, want %d ms", i, got.Sub(t0).Milliseconds(), p.want)
				}
			}
		})
	}
}
