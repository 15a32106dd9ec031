package minatar

import "math/rand/v2"

// Breakout channels.
const (
	boPaddle = iota
	boBall
	boTrail
	boBrick
)

const (
	brickTop, brickBottom = 1, 4 // bricks fill rows [1, 4)
	ballStartRow          = 3    // the bricks' lowest row, at a side
	paddleStart           = 4
)

var breakoutSpec = spec{
	name:     "breakout",
	channels: []string{"paddle", "ball", "trail", "brick"},
	glyphs:   "=O-#",
	minimal:  []int32{Noop, Left, Right},
	newGame:  func(bool) game { return new(breakout) },
}

// breakout: a paddle on the bottom row, three rows of bricks, and a ball
// that moves one cell diagonally per step. A brick broken earns 1; the ball
// falling past the paddle ends the episode; a cleared wall is rebuilt.
type breakout struct {
	paddle       int
	x, y         int // the ball
	dx, dy       int // its direction, each ±1
	lastX, lastY int // where it was before the last step (the trail)
	// struck is set while the ball is meeting bricks on consecutive steps:
	// as in MinAtar, only the first of a run of contacts breaks a brick
	// and bounces; the ball passes into the bricks it meets after it.
	struck bool
	bricks plane
}

func (g *breakout) reset(rng *rand.Rand) {
	*g = breakout{paddle: paddleStart, y: ballStartRow, dy: 1}
	// The ball starts at either side, heading down and inwards.
	if coin(rng) {
		g.x, g.dx = 0, 1
	} else {
		g.x, g.dx = Size-1, -1
	}
	g.lastX, g.lastY = g.x, g.y
	g.bricks.fill(brickTop, brickBottom, 0, Size)
}

// step moves the paddle, then the ball. The ball always tries to advance
// one cell diagonally; a bounce cancels the blocked half of the move and
// reverses that half of the direction: a side wall cancels the column
// change, the top wall, a brick or the paddle cancel the row change. A
// brick met on the step after a brick contact is not broken: the ball
// moves into its cell and keeps its direction (MinAtar's strike rule).
func (g *breakout) step(a int32, _ *rand.Rand) (reward int, terminal bool) {
	hit := false
	switch a {
	case Left:
		g.paddle = max(0, g.paddle-1)
	case Right:
		g.paddle = min(Size-1, g.paddle+1)
	}
	g.lastX, g.lastY = g.x, g.y
	nx, ny := g.x+g.dx, g.y+g.dy
	if nx < 0 || nx >= Size {
		nx = clamp(nx, 0, Size-1)
		g.dx = -g.dx
	}
	switch {
	case ny < 0:
		ny, g.dy = g.y, -g.dy
	case g.bricks[ny][nx]:
		hit = true
		if !g.struck {
			g.bricks[ny][nx] = false
			reward = 1
			ny, g.dy = g.y, -g.dy
		}
	case ny == Size-1:
		// The wall is rebuilt when the ball comes down after clearing it,
		// away from the brick rows it could otherwise overlap.
		if g.bricks.count() == 0 {
			g.bricks.fill(brickTop, brickBottom, 0, Size)
		}
		switch g.paddle {
		case g.x: // under the ball's column: it bounces up, still
			// heading the same way across
			ny, g.dy = g.y, -g.dy
		case nx: // under where the ball lands, its edge facing the
			// ball: it bounces back the way it came
			ny, g.dy, g.dx = g.y, -g.dy, -g.dx
		default:
			terminal = true
		}
	}
	g.struck = hit
	g.x, g.y = nx, ny
	return reward, terminal
}

func (g *breakout) draw(o grid) {
	o.set(Size-1, g.paddle, boPaddle)
	o.set(g.y, g.x, boBall)
	o.set(g.lastY, g.lastX, boTrail)
	g.bricks.draw(o, boBrick)
}
