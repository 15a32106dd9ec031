package duty

import "testing"

func TestLatch(t *testing.T) {
	tests := []struct {
		name   string
		shares []float64
		want   []bool
	}{
		{"set at On", []float64{0.2, 0.5, 0.9}, []bool{false, true, true}},
		{"hovering at the threshold stays set", []float64{0.55, 0.49, 0.51, 0.45, 0.41}, []bool{true, true, true, true, true}},
		{"cleared below Off", []float64{0.6, 0.39, 0.45, 0.5}, []bool{true, false, false, true}},
		{"never set between the two", []float64{0.45, 0.49}, []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Latch{On: 0.5, Off: 0.4}
			for i, sh := range tt.shares {
				if got := l.At(sh); got != tt.want[i] {
					t.Errorf("share %v (step %d): %v, want %v", sh, i, got, tt.want[i])
				}
			}
			l.Reset()
			if l.At(0.45) {
				t.Error("set after Reset at a share below On")
			}
		})
	}
}
