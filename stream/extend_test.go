package stream

import (
	"slices"
	"testing"
)

// TestExtend: a request decoded into the batch's free capacity joins the
// batch without a copy; one the decoder had to put elsewhere is appended.
func TestExtend(t *testing.T) {
	for _, tc := range []struct {
		name string
		// src returns the request's rows given the batch [1 2] with
		// capacity 4.
		src        func(batch []float32) []float32
		want       []float32
		wantInTail bool // the rows were already in place
	}{
		{"decoded into the free capacity", func(b []float32) []float32 { return append(tail(b), 3, 4) }, []float32{1, 2, 3, 4}, true},
		{"decoded elsewhere", func([]float32) []float32 { return []float32{3, 4} }, []float32{1, 2, 3, 4}, false},
		{"larger than the free capacity", func([]float32) []float32 { return []float32{3, 4, 5} }, []float32{1, 2, 3, 4, 5}, false},
		{"empty", func(b []float32) []float32 { return tail(b) }, []float32{1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := append(make([]float32, 0, 4), 1, 2)
			src := tc.src(batch)
			inTail := len(src) > 0 && cap(batch) > len(batch) && &batch[:len(batch)+1][len(batch)] == &src[0]
			if inTail != tc.wantInTail {
				t.Fatalf("case set-up: rows in the free capacity %v, want %v", inTail, tc.wantInTail)
			}
			got := extend(batch, src)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("extend = %v, want %v", got, tc.want)
			}
		})
	}
}
