package nn

// lower converts between n images x ([n, inH, inW, inC], channels last)
// and their im2col matrix col ([n·outH·outW, k·k·inC]): row (img, oy, ox)
// holds the window of the output pixel (oy, ox) in (ky, kx, c) order, the
// row order of the weights (see ParamInfo), with zeros where the window
// covers padding.
//
// With scatter false it fills col from x (im2col). With scatter true it is
// the adjoint, col2im: it adds every element of col into the element of x
// it was copied from (padding drops out), which turns the gradient with
// respect to the patches into that with respect to the input. One function
// does both so that the two cannot disagree about the layout.
//
// Channels last makes the k·inC values of one window row a single
// contiguous run of x (k neighbouring pixels, every channel of each), so
// each window row is one copy, not k·inC scalar loads.
func (g convGeom) lower(x []float32, n int, col []float32, scatter bool) {
	run := g.k * g.inC // one window row
	cols := g.k * run
	r := 0
	for img := range n {
		xi := x[img*g.inSize() : (img+1)*g.inSize()]
		for oy := range g.outH {
			iy0 := oy*g.stride - g.pad
			for ox := range g.outW {
				ix0 := ox*g.stride - g.pad
				// The window's columns kx in [lo, hi) fall inside the image.
				lo, hi := max(0, -ix0), min(g.k, g.inW-ix0)
				row := col[r*cols : (r+1)*cols]
				r++
				if !scatter && lo == 0 && hi == g.k && iy0 >= 0 && iy0+g.k <= g.inH {
					// Inside the image (every window without padding): a
					// copy per window row, nothing to clear. The checks
					// and empty clears of the general loop were a third
					// of lowering a MinAtar batch.
					start := (iy0*g.inW + ix0) * g.inC
					for ky := range g.k {
						copy(row[ky*run:(ky+1)*run], xi[start:start+run])
						start += g.inW * g.inC
					}
					continue
				}
				for ky := range g.k {
					seg := row[ky*run : (ky+1)*run]
					iy := iy0 + ky
					if iy < 0 || iy >= g.inH || lo >= hi {
						if !scatter {
							clear(seg)
						}
						continue
					}
					start := (iy*g.inW + ix0) * g.inC
					src := xi[start+lo*g.inC : start+hi*g.inC]
					in := seg[lo*g.inC : hi*g.inC]
					if scatter {
						for j, v := range in {
							src[j] += v
						}
						continue
					}
					clear(seg[:lo*g.inC])
					copy(in, src)
					clear(seg[hi*g.inC:])
				}
			}
		}
	}
}

// im2col fills col from the n images x, as lower does with scatter false,
// on the active kernels.
func (g convGeom) im2col(x []float32, n int, col []float32) { active.im2col(g, x, n, col) }

// im2colGo is im2col in Go: lower itself.
func im2colGo(g convGeom, x []float32, n int, col []float32) { g.lower(x, n, col, false) }

// col2im adds col into the n images x, as lower does with scatter true, on
// the active kernels.
func (g convGeom) col2im(x []float32, n int, col []float32) { active.col2im(g, x, n, col) }

// col2imGo is col2im in Go: lower itself.
func col2imGo(g convGeom, x []float32, n int, col []float32) { g.lower(x, n, col, true) }
