package env

// Connect4Move is what a Connect Four move did with what its position
// offered, read from the mover's observation: whether a disc of its own
// could make four at once, and whether it did; whether the opponent
// threatened four at a playable cell, and whether the move took that
// cell; and whether the move put its disc right under a cell where the
// opponent would make four (handing it the win).
type Connect4Move struct {
	CouldWin, Won      bool
	MustBlock, Blocked bool
	GaveWin            bool
}

// Connect4Classify classifies playing column col in the position obs
// (one agent's observation of connect4, from its side). A move that wins
// is never counted as a missed block.
func Connect4Classify(obs []float32, col int) Connect4Move {
	var m Connect4Move
	for c := range c4Cols {
		r := c4Landing(obs, c)
		if r < 0 {
			continue
		}
		at := c4Planes * (r*c4Cols + c)
		if obs[at+4] == 1 {
			m.CouldWin = true
			m.Won = m.Won || c == col
		}
		if obs[at+5] == 1 {
			m.MustBlock = true
			m.Blocked = m.Blocked || c == col
		}
	}
	if r := c4Landing(obs, col); r > 0 && !m.Won {
		m.GaveWin = obs[c4Planes*((r-1)*c4Cols+col)+5] == 1
	}
	return m
}

// c4Landing is the row a disc dropped into col lands in, -1 if the column
// is full.
func c4Landing(obs []float32, col int) int {
	for r := c4Rows - 1; r >= 0; r-- {
		if at := c4Planes * (r*c4Cols + col); obs[at] == 0 && obs[at+1] == 0 {
			return r
		}
	}
	return -1
}
