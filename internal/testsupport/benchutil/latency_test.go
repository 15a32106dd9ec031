package benchutil

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var l Latencies
	l.Start(100)
	for i := 100; i >= 1; i-- {
		l.Record(time.Duration(i) * time.Millisecond)
	}
	cases := []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}}
	for _, c := range cases {
		if got := l.Percentile(c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	var empty Latencies
	if empty.Percentile(50) != 0 {
		t.Error("empty percentile should be 0")
	}
}
