package env

import (
	"errors"
	"testing"

	"github.com/distrl/distrl/api"
)

// play drops discs into cols in turn from a game whose seat 0 moves first.
func play(t *testing.T, g *Connect4, cols ...int) (winner int) {
	t.Helper()
	for _, c := range cols {
		mover := g.turn
		if g.drop(c) {
			return mover
		}
	}
	return -1
}

func newBoard(t *testing.T) *Connect4 {
	t.Helper()
	g, err := NewConnect4("")
	if err != nil {
		t.Fatal(err)
	}
	g.live = true
	return g
}

func TestConnect4Fours(t *testing.T) {
	tests := []struct {
		name   string
		cols   []int
		winner int
	}{
		{"row", []int{0, 0, 1, 1, 2, 2, 3}, 0},
		{"column", []int{0, 1, 0, 1, 0, 1, 0}, 0},
		{"diagonal up", []int{0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3}, 0},
		{"diagonal down", []int{6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3}, 0},
		{"second player", []int{6, 0, 6, 1, 5, 2, 6, 3}, 1},
		{"three only", []int{0, 6, 1, 6, 2}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := play(t, newBoard(t), tt.cols...); got != tt.winner {
				t.Errorf("winner %d, want %d", got, tt.winner)
			}
		})
	}
}

// The threat planes mark the empty cells where a disc would make four:
// plane 4 the observer's, plane 5 the opponent's, whether the cell can be
// played now or not.
func TestConnect4Threats(t *testing.T) {
	g := newBoard(t)
	// Seat 0: three in the bottom row (columns 0-2); seat 1: three up
	// column 6. Seat 0 to move.
	if w := play(t, g, 0, 6, 1, 6, 2, 6); w != -1 {
		t.Fatalf("winner %d", w)
	}
	cell := func(row, col, plane int) int { return c4Planes*(row*c4Cols+col) + plane }
	bottom := c4Rows - 1
	own, opp := g.observe(0), g.observe(1)
	want := map[int]bool{cell(bottom, 3, 4): true, cell(bottom-3, 6, 5): true}
	for i, v := range own {
		if p := i % c4Planes; p >= 4 && (v == 1) != want[i] {
			t.Errorf("seat 0's view, row %d col %d plane %d: %v", i/c4Planes/c4Cols, i/c4Planes%c4Cols, p, v)
		}
	}
	// Seat 1 sees the same cells the other way round.
	if opp[cell(bottom, 3, 5)] != 1 || opp[cell(bottom-3, 6, 4)] != 1 || opp[cell(bottom, 3, 4)] != 0 {
		t.Errorf("seat 1's view: %v %v %v", opp[cell(bottom, 3, 5)], opp[cell(bottom-3, 6, 4)], opp[cell(bottom, 3, 4)])
	}
	if g.board[cell(bottom, 3, 0)/c4Planes] != 0 {
		t.Error("observing left a disc on the board")
	}
}

// Two agents: only the mover's action counts, both see the board from
// their side with the turn flag, a disc for a full column goes into
// another, and the game ends for both with opposite rewards.
func TestConnect4TwoAgents(t *testing.T) {
	g, _ := NewConnect4("")
	obs, err := g.Reset(1)
	if err != nil || len(obs) != 2 {
		t.Fatal(obs, err)
	}
	first := g.turn
	if obs[first][2] != 1 || obs[first][c4Planes*(c4Cells-1)+2] != 1 || obs[1-first][2] != 0 {
		t.Fatalf("turn planes %v %v, seat %d moves", obs[0][2], obs[1][2], first)
	}
	acts := make([]api.Action, 2)
	acts[first], acts[1-first] = api.Action{Discrete: 3}, api.Action{Discrete: 5}
	s, err := g.Step(acts)
	if err != nil {
		t.Fatal(err)
	}
	// The mover's disc is in column 3 bottom row, from each side.
	bottom3 := c4Planes * ((c4Rows-1)*c4Cols + 3)
	if s.Obs[first][bottom3] != 1 || s.Obs[1-first][bottom3+1] != 1 || s.Obs[1-first][bottom3] != 0 || g.height[5] != 0 {
		t.Errorf("after the first move: own %v, opponent's view %v, column 5 height %d", s.Obs[first][bottom3], s.Obs[1-first][bottom3+1], g.height[5])
	}
	if s.Obs[first][2] != 0 || s.Obs[1-first][2] != 1 {
		t.Errorf("the turn did not pass: planes %v %v", s.Obs[first][2], s.Obs[1-first][2])
	}
	// Fill column 0 and drop into it again: the disc lands elsewhere.
	for range c4Rows {
		if _, err := g.Step([]api.Action{{Discrete: 0}, {Discrete: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	// Both see column 0 closed: its legal plane, where the action mask
	// looks, is 0 in every row; column 1's is 1.
	mask := g.ActionMask()
	for seat, o := range [][]float32{g.observe(0), g.observe(1)} {
		for row := range c4Rows {
			if at := c4Planes*(row*c4Cols) + 3; o[at] != 0 || o[at+c4Planes] != 1 {
				t.Fatalf("seat %d row %d: legal plane %v for the full column 0, %v for column 1", seat, row, o[at], o[at+c4Planes])
			}
		}
		if o[mask[0]] != 0 || o[mask[1]] != 1 || len(mask) != c4Cols {
			t.Fatalf("seat %d: the mask %v reads %v for column 0, %v for column 1", seat, mask, o[mask[0]], o[mask[1]])
		}
	}
	if a := g.Acting(); len(a) != 2 || a[g.turn] != true || a[1-g.turn] != false {
		t.Fatalf("Acting %v with seat %d to move", a, g.turn)
	}
	before := g.moves
	if s, err = g.Step([]api.Action{{Discrete: 0}, {Discrete: 0}}); err != nil || s.Terminated[0] {
		t.Fatal(s, err)
	}
	if g.moves != before+1 || g.height[0] != c4Rows {
		t.Errorf("a disc for the full column 0: %d moves after %d, column 0 holds %d", g.moves, before, g.height[0])
	}
	// Play column after column until someone wins: opposite rewards, the
	// game over for both.
	for col := 1; ; col = col%6 + 1 {
		mover := g.turn
		s, err = g.Step([]api.Action{{Discrete: int32(col)}, {Discrete: int32(col)}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Terminated[0] {
			if !s.Terminated[1] || s.Rewards[mover]+s.Rewards[1-mover] != 0 || s.Rewards[mover] == -1 {
				t.Errorf("end: %+v, mover %d", s, mover)
			}
			break
		}
	}
	if _, err := g.Step(acts); !errors.Is(err, api.ErrNeedsReset) {
		t.Errorf("step after the end: %v", err)
	}
}

// The scripted opponent takes a win, blocks one, and beats a random
// player far more often than it loses.
func TestConnect4Scripted(t *testing.T) {
	g := newBoard(t)
	g.opponent = Connect4Scripted
	play(t, g, 0, 6, 1, 6, 2) // seat 0 threatens column 3; seat 1 to move
	if c := g.opponentMove(); c != 3 {
		t.Errorf("block: column %d, want 3", c)
	}
	g = newBoard(t)
	g.opponent = Connect4Scripted
	play(t, g, 0, 6, 1, 6, 2, 6) // seat 0 to move, can win at 3
	if c := g.opponentMove(); c != 3 {
		t.Errorf("win: column %d, want 3", c)
	}

	for _, tt := range []struct {
		opponent string
		min, max float64 // the random agent's share of wins
	}{{Connect4Scripted, 0, 0.15}, {Connect4Random, 0.35, 0.65}} {
		g, _ := NewConnect4(tt.opponent)
		agent, _ := NewConnect4(Connect4Random) // a source of random legal moves
		wins, games := 0, 400
		for i := range games {
			if _, err := g.Reset(int64(i)); err != nil {
				t.Fatal(err)
			}
			agent.rng = g.rng
			for {
				agent.board, agent.height, agent.turn = g.board, g.height, g.turn
				s, err := g.Step([]api.Action{{Discrete: int32(agent.opponentMove())}})
				if err != nil {
					t.Fatal(err)
				}
				if s.Terminated[0] {
					if s.Rewards[0] > 0 {
						wins++
					}
					break
				}
			}
		}
		share := float64(wins) / float64(games)
		if share < tt.min || share > tt.max {
			t.Errorf("a random player wins %.2f of %d games against %s, want %.2f to %.2f", share, games, tt.opponent, tt.min, tt.max)
		}
	}
}

// Connect4Classify reads, from the mover's observation, a win it could
// take, a threat it had to block, and a move that hands the opponent the
// cell above.
func TestConnect4Classify(t *testing.T) {
	g := newBoard(t)
	// Seat 0: 0, 1, 2 on the bottom row; seat 1: three up column 6 and a
	// disc in column 4. Seat 0 to move: it wins in column 3, and must
	// block column 6 otherwise.
	play(t, g, 0, 6, 1, 6, 2, 6)
	obs := g.observe(0)
	tests := []struct {
		col  int
		want Connect4Move
	}{
		{3, Connect4Move{CouldWin: true, Won: true, MustBlock: true}},
		{6, Connect4Move{CouldWin: true, MustBlock: true, Blocked: true}},
		{5, Connect4Move{CouldWin: true, MustBlock: true}},
	}
	for _, tt := range tests {
		if got := Connect4Classify(obs, tt.col); got != tt.want {
			t.Errorf("column %d: %+v, want %+v", tt.col, got, tt.want)
		}
	}
	// Seat 1 three in a row on the second row (columns 0-2) over a bottom
	// row of mixed discs: seat 0 dropping into column 3 puts its disc
	// under seat 1's four.
	g = newBoard(t)
	for col, who := range []int8{1, 2, 1} {
		g.board[(c4Rows-1)*c4Cols+col] = who
		g.board[(c4Rows-2)*c4Cols+col] = 2
		g.height[col] = 2
	}
	g.turn = 0
	if got := Connect4Classify(g.observe(0), 3); !got.GaveWin || got.Won || got.CouldWin || got.MustBlock {
		t.Errorf("column 3 under the opponent's four: %+v", got)
	}
	if got := Connect4Classify(g.observe(0), 4); got.GaveWin {
		t.Errorf("column 4: %+v", got)
	}
}
