package trainerworker

import (
	"testing"
	"time"

	"github.com/distrl/distrl/worker"
)

// keepStep is a version published some seconds after the one before, and
// whether it is due.
type keepStep struct {
	version int64
	after   float64
	due     bool
}

// A keeper keeps version 0, every keep_every'th version, and with
// keep_every_s the first version published once that long has passed
// since the last kept.
func TestKeeperDue(t *testing.T) {
	tests := []struct {
		name  string
		cfg   KeepConfig
		steps []keepStep
	}{
		{"by count", KeepConfig{KeepEvery: 3},
			[]keepStep{{0, 0, true}, {1, 100, false}, {2, 0, false}, {3, 0, true}, {4, 0, false}, {6, 0, true}}},
		{"by time", KeepConfig{KeepEverySeconds: 10},
			[]keepStep{{0, 0, true}, {1, 4, false}, {2, 5.9, false}, {3, 0.2, true}, {4, 9, false}, {5, 1, true}}},
		{"both", KeepConfig{KeepEvery: 4, KeepEverySeconds: 10},
			[]keepStep{{0, 0, true}, {1, 11, true}, {2, 1, false}, {4, 1, true}, {5, 9, false}, {6, 1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			k := &keeper{cfg: tt.cfg, last: -1, now: func() time.Time { return now }}
			for _, s := range tt.steps {
				now = now.Add(time.Duration(s.after * float64(time.Second)))
				if got := k.due(s.version); got != s.due {
					t.Fatalf("version %d after %vs: due %v, want %v", s.version, s.after, got, s.due)
				}
				if s.due { // as keep does
					k.last, k.lastAt = s.version, k.now()
				}
			}
		})
	}
	var none *keeper
	if none.due(0) || newKeeper(worker.Info{}, KeepConfig{}, "p", "/tmp") != nil {
		t.Error("a trainer that keeps nothing keeps a version")
	}
}
