package nn

import (
	"slices"
	"testing"
)

// TestFillRows: every row is the given one, whatever the row's width and
// the number of rows (one, a power of two, around the copy block, odd).
func TestFillRows(t *testing.T) {
	for _, width := range []int{1, 2, 3, 16, 64, 1000, fillBlock, fillBlock + 1} {
		for _, rows := range []int{1, 2, 7, 64, 65, fillBlock/width + 1, 3*fillBlock/width + 5} {
			row := make([]float32, width)
			for i := range row {
				row[i] = float32(i + 1)
			}
			y := make([]float32, rows*width+3) // the extra tail must stay untouched
			fillRows(y[:rows*width], row)
			for r := range rows {
				if got := y[r*width : (r+1)*width]; !slices.Equal(got, row) {
					t.Fatalf("width %d, rows %d: row %d = %v", width, rows, r, got[:min(5, width)])
				}
			}
			if tail := y[rows*width:]; !slices.Equal(tail, []float32{0, 0, 0}) {
				t.Fatalf("width %d, rows %d: wrote past the rows: %v", width, rows, tail)
			}
		}
	}
	fillRows(nil, nil) // nothing to do, and no endless loop
}
