package trainerworker

import "testing"

func TestOverlapFor(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name       string
		configured *bool
		kind       string
		can        bool
		want       bool
		wantErr    bool
	}{
		{"default on the CPU", nil, "cpu", true, false, false},
		{"default on a GPU", nil, "cuda", true, true, false},
		{"default on a GPU where it cannot", nil, "cuda", false, false, false},
		{"on, on the CPU", &on, "cpu", true, true, false},
		{"off on a GPU", &off, "cuda", true, false, false},
		{"on where it cannot", &on, "cuda", false, false, true},
		{"off where it cannot", &off, "cpu", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := overlapFor(tc.configured, tc.kind, tc.can)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("overlapFor = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
