package env

import (
	"fmt"
	"math/rand/v2"

	"github.com/distrl/distrl/api"
)

// Connect Four: two players drop discs into a board of 7 columns and 6
// rows; four of one's own in a row, column or diagonal wins, a full board
// is a draw.
//
// The environment "connect4" has two agents, player_0 and player_1, who
// take turns; who moves first is drawn per episode from the reset seed.
// Every step takes an action of each agent and applies the one whose turn
// it is; the other's is ignored, and the game says whose turn it is
// (api.Turns), so that an actor asks only the mover. Both observe the
// board from their own side as an image of 6 rows (top first), 7 columns
// and 6 channels: their discs, the opponent's, a plane of ones when it is
// their turn (zeros otherwise), so that a convolution sees lines of discs;
// ones in the columns that are not full, which also mark the legal moves
// for a policy's action mask (api.ActionMasker); and the threats: the
// empty cells where a disc of theirs, and where one of the opponent's,
// would make four (playable now or not), what the scripted opponent looks
// for. Rewards come at the end: +1 the winner, -1 the loser, 0 both for a
// draw. A disc for a full column (from a policy without the mask) goes
// into a legal column drawn uniformly instead: were an illegal move a
// loss, self-play would learn to force the other side into one (a network
// that prefers a column keeps dropping into it) rather than to play, and
// lose to opponents who never make one.
//
// With env_config {opponent: random | scripted} it is a game for one agent,
// player_0, against an opponent played inside the environment: random
// plays a legal column uniformly; scripted (Connect4Scripted) wins when it
// can, blocks an immediate win, avoids giving one, and otherwise prefers
// the centre. The seat is drawn per episode, so player_0 moves first in
// about half the games. An episode's return is then +1 for a win, 0 a
// draw, -1 a loss: the evaluator's win rate counts returns above 0.
const (
	Connect4Name = "connect4"
	c4Cols       = 7
	c4Rows       = 6
	c4Cells      = c4Cols * c4Rows
	c4Planes     = 6 // own discs, the opponent's, my turn, legal columns, my and their winning cells
	c4ObsDim     = c4Planes * c4Cells
	c4pcgStream  = 0xc4c4
)

// Opponents of the one-agent Connect Four.
const (
	Connect4Random   = "random"
	Connect4Scripted = "scripted"
)

// Connect4 is the game, for two agents or one against an opponent.
type Connect4 struct {
	board    [c4Cells]int8 // 0 empty, 1 seat 0's disc, 2 seat 1's
	height   [c4Cols]int   // discs in each column
	turn     int           // seat to move: 0 or 1
	moves    int
	live     bool
	opponent string // "" for two agents
	seat     int    // one agent: the agent's seat
	pcg      *rand.PCG
	rng      *rand.Rand
	acting   [2]bool // Acting's answer
}

// NewConnect4 returns the game for two agents (opponent ""), or for one
// against Connect4Random or Connect4Scripted.
func NewConnect4(opponent string) (*Connect4, error) {
	switch opponent {
	case "", Connect4Random, Connect4Scripted:
	default:
		return nil, fmt.Errorf("env: connect4 opponent %q, want %q, %q or none (two agents)", opponent, Connect4Random, Connect4Scripted)
	}
	pcg := rand.NewPCG(0, c4pcgStream)
	return &Connect4{opponent: opponent, pcg: pcg, rng: rand.New(pcg)}, nil
}

func newConnect4Env(cfg map[string]any) (api.Env, error) {
	c := api.Config(cfg)
	if err := c.CheckKeys("opponent"); err != nil {
		return nil, err
	}
	o, err := c.String("opponent", "")
	if err != nil {
		return nil, err
	}
	return NewConnect4(o)
}

// Reset empties the board and draws who moves first; against an opponent
// that moves first, its first disc is down before the agent observes.
func (g *Connect4) Reset(seed int64) ([][]float32, error) {
	g.pcg.Seed(uint64(seed), c4pcgStream)
	g.board, g.height, g.moves, g.live = [c4Cells]int8{}, [c4Cols]int{}, 0, true
	g.turn = g.rng.IntN(2)
	if g.opponent == "" {
		return [][]float32{g.observe(0), g.observe(1)}, nil
	}
	g.seat = g.rng.IntN(2)
	if g.turn != g.seat {
		g.drop(g.opponentMove())
	}
	return [][]float32{g.observe(g.seat)}, nil
}

// Step applies the mover's action (two agents), or the agent's and then
// the opponent's reply (one agent).
func (g *Connect4) Step(actions []api.Action) (api.Step, error) {
	if !g.live {
		return api.Step{}, fmt.Errorf("env: connect4: %w", api.ErrNeedsReset)
	}
	n := 2
	if g.opponent != "" {
		n = 1
	}
	if len(actions) != n {
		return api.Step{}, fmt.Errorf("env: connect4: %d actions for %d agents", len(actions), n)
	}
	mover := g.turn
	col := int(actions[0].Discrete)
	if g.opponent == "" {
		col = int(actions[mover].Discrete)
	}
	if col < 0 || col >= c4Cols || g.height[col] == c4Rows {
		col = g.randomLegal()
	}
	winner := -1 // seat that won, -1: nobody yet, 2: draw
	switch {
	case g.drop(col):
		winner = mover
	case g.moves == c4Cells:
		winner = 2
	case g.opponent != "":
		// The opponent replies at once; the agent sees the board after it.
		switch opp := g.turn; {
		case g.drop(g.opponentMove()):
			winner = opp
		case g.moves == c4Cells:
			winner = 2
		}
	}
	if winner >= 0 {
		g.live = false
	}
	if g.opponent != "" {
		return g.result(winner, g.seat), nil
	}
	s0, s1 := g.result(winner, 0), g.result(winner, 1)
	return api.Step{
		Obs:        [][]float32{s0.Obs[0], s1.Obs[0]},
		Rewards:    []float32{s0.Rewards[0], s1.Rewards[0]},
		Terminated: []bool{s0.Terminated[0], s1.Terminated[0]},
		Truncated:  []bool{false, false},
	}, nil
}

// result is seat's view of the step: its observation, and its reward if
// the game is over (winner a seat, 2 a draw, -1 not over).
func (g *Connect4) result(winner, seat int) api.Step {
	var r float32
	switch winner {
	case seat:
		r = 1
	case 1 - seat:
		r = -1
	}
	return api.Step{Obs: [][]float32{g.observe(seat)}, Rewards: []float32{r},
		Terminated: []bool{winner >= 0}, Truncated: []bool{false}}
}

// drop puts the mover's disc into col (legal) and passes the turn; it
// reports whether the disc made four in a row.
func (g *Connect4) drop(col int) bool {
	row := c4Rows - 1 - g.height[col]
	g.board[row*c4Cols+col] = int8(g.turn + 1)
	g.height[col]++
	g.moves++
	won := g.fours(row, col)
	g.turn = 1 - g.turn
	return won
}

// fours reports whether the disc at row, col is part of four in a line.
func (g *Connect4) fours(row, col int) bool {
	who := g.board[row*c4Cols+col]
	for _, d := range [4][2]int{{0, 1}, {1, 0}, {1, 1}, {1, -1}} {
		n := 1
		for _, sign := range [2]int{1, -1} {
			r, c := row+sign*d[0], col+sign*d[1]
			for r >= 0 && r < c4Rows && c >= 0 && c < c4Cols && g.board[r*c4Cols+c] == who {
				n++
				r, c = r+sign*d[0], c+sign*d[1]
			}
		}
		if n >= 4 {
			return true
		}
	}
	return false
}

// wins reports whether the mover would make four by dropping into col.
func (g *Connect4) wins(col, seat int) bool {
	if g.height[col] == c4Rows {
		return false
	}
	return g.foursWith(c4Rows-1-g.height[col], col, seat)
}

// foursWith reports whether a disc of seat at row, col (an empty cell,
// playable or not) would make four in a line.
func (g *Connect4) foursWith(row, col, seat int) bool {
	g.board[row*c4Cols+col] = int8(seat + 1)
	won := g.fours(row, col)
	g.board[row*c4Cols+col] = 0
	return won
}

// c4CentreWeights make the scripted opponent prefer central columns,
// which take part in the most lines.
var c4CentreWeights = [c4Cols]int{1, 2, 3, 4, 3, 2, 1}

// legal lists the columns that are not full.
func (g *Connect4) legal() []int {
	var out []int
	for c := range c4Cols {
		if g.height[c] < c4Rows {
			out = append(out, c)
		}
	}
	return out
}

// randomLegal is a legal column drawn uniformly (the game is not over, so
// there is one).
func (g *Connect4) randomLegal() int {
	l := g.legal()
	return l[g.rng.IntN(len(l))]
}

// opponentMove is the built-in opponent's column for the seat to move.
func (g *Connect4) opponentMove() int {
	if g.opponent == Connect4Random {
		return g.randomLegal()
	}
	return g.scripted(g.legal(), g.turn, 1-g.turn)
}

// scripted is Connect4Scripted's move: win now; else block the opponent's
// win now; else a column that does not hand the opponent a win on top of
// it, drawn with weights favouring the centre (any legal column if every
// one does).
func (g *Connect4) scripted(legal []int, me, them int) int {
	for _, c := range legal {
		if g.wins(c, me) {
			return c
		}
	}
	for _, c := range legal {
		if g.wins(c, them) {
			return c
		}
	}
	var safe []int
	for _, c := range legal {
		if g.height[c]+1 < c4Rows {
			// The cell above the disc would be the opponent's to take.
			g.height[c]++
			gives := g.wins(c, them)
			g.height[c]--
			if gives {
				continue
			}
		}
		safe = append(safe, c)
	}
	if len(safe) == 0 {
		safe = legal
	}
	total := 0
	for _, c := range safe {
		total += c4CentreWeights[c]
	}
	x := g.rng.IntN(total)
	for _, c := range safe {
		if x -= c4CentreWeights[c]; x < 0 {
			return c
		}
	}
	return safe[len(safe)-1]
}

// observe is the board from seat's side, [row][col][plane].
func (g *Connect4) observe(seat int) []float32 {
	obs := make([]float32, c4ObsDim)
	turn := float32(0)
	if g.live && g.turn == seat {
		turn = 1
	}
	for i, v := range g.board {
		switch int(v) - 1 {
		case seat:
			obs[c4Planes*i] = 1
		case 1 - seat:
			obs[c4Planes*i+1] = 1
		}
		obs[c4Planes*i+2] = turn
		if g.height[i%c4Cols] < c4Rows {
			obs[c4Planes*i+3] = 1
		}
		if v == 0 {
			for p, who := range [2]int{seat, 1 - seat} {
				if g.foursWith(i/c4Cols, i%c4Cols, who) {
					obs[c4Planes*i+4+p] = 1
				}
			}
		}
	}
	return obs
}

// c4Mask is where an observation marks each column legal: the legal plane
// in the top row.
var c4Mask = func() []int {
	m := make([]int, c4Cols)
	for c := range m {
		m[c] = c4Planes*c + 3
	}
	return m
}()

// ActionMask says where an observation marks the legal columns
// (api.ActionMasker), so that a policy plays only those.
func (g *Connect4) ActionMask() []int { return c4Mask }

// Acting is the seat to move, for two agents (api.Turns): the actor asks
// only the mover for an action. One agent against an opponent always
// acts: nil.
func (g *Connect4) Acting() []bool {
	if g.opponent != "" {
		return nil
	}
	g.acting = [2]bool{g.turn == 0, g.turn == 1}
	return g.acting[:]
}

// ObservationSpace is the [6, 7, 6] image of the board, values in [0, 1].
func (g *Connect4) ObservationSpace() api.Space { return api.NewBox(0, 1, c4Rows, c4Cols, c4Planes) }

// ActionSpace is the 7 columns.
func (g *Connect4) ActionSpace() api.Space { return api.NewDiscrete(c4Cols) }

// Agents are player_0 and player_1, or player_0 alone against an opponent.
func (g *Connect4) Agents() []string {
	if g.opponent != "" {
		return []string{"player_0"}
	}
	return []string{"player_0", "player_1"}
}

// Close does nothing.
func (g *Connect4) Close() error { return nil }
