package minatar

import "math/rand/v2"

// Size is the side of the square grid every game is played on.
const Size = 10

// The full action set, in MinAtar's order. An Env with minimal actions
// numbers its actions 0..n-1 and maps them onto these.
const (
	Noop int32 = iota
	Left
	Up
	Right
	Down
	Fire
	// NumActions is the size of the full action set.
	NumActions
)

// actionNames are the letters MinAtar uses for the full action set.
const actionNames = "nlurdf"

// game is the rules of one game. The Env around it owns the random
// generator, sticky actions, the episode bookkeeping and the observation
// buffer, so that a game holds only its own state.
type game interface {
	// reset starts a new episode, drawing what it needs from rng.
	reset(rng *rand.Rand)
	// step applies one action of the full set and returns the reward and
	// whether the episode terminated.
	step(a int32, rng *rand.Rand) (reward int, terminal bool)
	// draw marks the current state in g, which is all zeros on entry.
	draw(g grid)
}

// spec describes a game: its name, its observation channels in MinAtar's
// order, its minimal action set and how to make one.
type spec struct {
	name     string
	channels []string
	// glyphs has one character per channel for Render: letters are
	// objects, drawn over anything else (trails, gauges) in the cell.
	glyphs  string
	minimal []int32
	// newGame returns a game in an unspecified state; reset starts it.
	newGame func(ramping bool) game
}

// grid is an observation buffer of Size x Size cells of c channels,
// row-major with the channels last, as the Box of shape [10, 10, c].
type grid struct {
	cells []float32
	c     int
}

// set marks channel ch of the cell at (row, col). Cells off the grid are
// ignored, so that trails of objects at an edge need no special case.
func (g grid) set(row, col, ch int) {
	if row < 0 || row >= Size || col < 0 || col >= Size {
		return
	}
	g.cells[(row*Size+col)*g.c+ch] = 1
}

// runner is an object that crosses the grid along one row: Asterix's
// enemies and gold, Seaquest's fish, submarines, divers and bullets,
// Freeway's cars.
type runner struct {
	x, y  int
	right bool // moving towards higher columns
	wait  int  // steps until the next move, for runners with a timer
}

// fromSide returns a runner entering row y from a side picked by a coin
// flip: from column 0 moving right, or from column 9 moving left.
func fromSide(rng *rand.Rand, y int) runner {
	if coin(rng) {
		return runner{x: 0, y: y, right: true}
	}
	return runner{x: Size - 1, y: y}
}

// move advances the runner one column in its direction.
func (r *runner) move() {
	if r.right {
		r.x++
	} else {
		r.x--
	}
}

// tick counts the runner's timer down and, when it has run out, moves the
// runner and restarts the timer at period: a runner with period p moves
// once every p+1 steps. It reports whether the runner moved.
func (r *runner) tick(period int) bool {
	if r.wait > 0 {
		r.wait--
		return false
	}
	r.wait = period
	r.move()
	return true
}

func (r runner) offGrid() bool    { return r.x < 0 || r.x >= Size }
func (r runner) at(x, y int) bool { return r.x == x && r.y == y }

// trailX is the column the runner came from, where its trail channel shows
// its direction (possibly off the grid).
func (r runner) trailX() int {
	if r.right {
		return r.x - 1
	}
	return r.x + 1
}

// pace is the difficulty of the games whose enemies come faster and more
// often as the episode goes on (Asterix, Seaquest): the steps between
// spawns and between moves.
type pace struct {
	spawn, move int
	notches     int // how many times the game got harder
}

// canRamp reports whether the pace can still get harder, with moves no
// faster than minMove.
func (p pace) canRamp(minMove int) bool { return p.spawn > 1 || p.move > minMove }

// harder ramps the difficulty one notch: spawns come one step sooner every
// time, moves one step sooner every other time (so that speed ramps at half
// the rate of the spawn rate, as in MinAtar).
func (p *pace) harder(minMove int) {
	if p.move > minMove && p.notches%2 == 1 {
		p.move--
	}
	if p.spawn > 1 {
		p.spawn--
	}
	p.notches++
}

// coin is a fair coin flip.
func coin(rng *rand.Rand) bool { return rng.Uint64()&1 == 0 }

// clamp limits v to [lo, hi].
func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }
