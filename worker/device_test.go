package worker_test

import (
	"testing"

	"github.com/distrl/distrl/worker"
)

func TestParseDevice(t *testing.T) {
	tests := []struct {
		in      string
		kind    string
		ordinal int
		ok      bool
	}{
		{"", "cpu", 0, true},
		{"cpu", "cpu", 0, true},
		{"cuda", "cuda", 0, true},
		{"cuda:0", "cuda", 0, true},
		{"cuda:3", "cuda", 3, true},
		{"cuda:", "", 0, false},
		{"cuda:-1", "", 0, false},
		{"cuda:01", "", 0, false},
		{"cuda:1x", "", 0, false},
		{"gpu:0", "", 0, false},
		{"cpu:0", "", 0, false},
	}
	for _, tt := range tests {
		kind, n, err := worker.ParseDevice(tt.in)
		if (err == nil) != tt.ok || kind != tt.kind || n != tt.ordinal {
			t.Errorf("ParseDevice(%q) = %q, %d, %v; want %q, %d, ok %v", tt.in, kind, n, err, tt.kind, tt.ordinal, tt.ok)
		}
	}
}
