package minatar

// plane is one boolean layer of the grid, indexed [row][column]: Breakout's
// bricks, Space Invaders' aliens and bullets.
type plane [Size][Size]bool

// count returns the number of cells set.
func (p *plane) count() int {
	n := 0
	for r := range p {
		for _, v := range p[r] {
			if v {
				n++
			}
		}
	}
	return n
}

// fill sets rows [r0, r1) from column c0 to c1 (exclusive).
func (p *plane) fill(r0, r1, c0, c1 int) {
	for r := r0; r < r1; r++ {
		for c := c0; c < c1; c++ {
			p[r][c] = true
		}
	}
}

// rowAny reports whether any cell of row r is set.
func (p *plane) rowAny(r int) bool {
	for _, v := range p[r] {
		if v {
			return true
		}
	}
	return false
}

// colAny reports whether any cell of column c is set.
func (p *plane) colAny(c int) bool {
	for r := range p {
		if p[r][c] {
			return true
		}
	}
	return false
}

// lowest returns the highest row index set in column c, or -1.
func (p *plane) lowest(c int) int {
	for r := Size - 1; r >= 0; r-- {
		if p[r][c] {
			return r
		}
	}
	return -1
}

// shiftRows moves every cell d rows down (d > 0) or up (d < 0); what leaves
// the grid is dropped and the rows left behind are cleared.
func (p *plane) shiftRows(d int) {
	var q plane
	for r := range p {
		if nr := r + d; nr >= 0 && nr < Size {
			q[nr] = p[r]
		}
	}
	*p = q
}

// shiftCols moves every cell d columns right (d > 0) or left (d < 0),
// dropping what leaves the grid.
func (p *plane) shiftCols(d int) {
	var q plane
	for r := range p {
		for c, v := range p[r] {
			if nc := c + d; v && nc >= 0 && nc < Size {
				q[r][nc] = true
			}
		}
	}
	*p = q
}

// draw marks every set cell in channel ch of g.
func (p *plane) draw(g grid, ch int) {
	for r := range p {
		for c, v := range p[r] {
			if v {
				g.set(r, c, ch)
			}
		}
	}
}
