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

func TestAppendInPlace(t *testing.T) {
	buf := make([]float32, 2, 8)
	buf[0], buf[1] = 1, 2
	tail := buf[2:2]
	tail = append(tail, 3, 4) // decoded into the free capacity
	got := appendInPlace(buf, tail)
	if len(got) != 4 || got[2] != 3 || got[3] != 4 || &got[0] != &buf[0] {
		t.Fatalf("in place: %v", got)
	}
	// Elsewhere (a decode that grew its own storage): copied.
	other := []float32{5, 6}
	got = appendInPlace(got, other)
	if len(got) != 6 || got[4] != 5 || got[5] != 6 || &got[4] == &other[0] {
		t.Fatalf("copied: %v", got)
	}
	// No room left after dst: copied into new storage.
	full := []float32{1}
	if got := appendInPlace(full, []float32{2}); len(got) != 2 || got[1] != 2 {
		t.Fatalf("full: %v", got)
	}
	if got := appendInPlace(full[:1:1], nil); len(got) != 1 {
		t.Fatalf("empty src: %v", got)
	}
}
