package minatar

import "math/rand/v2"

// Asterix channels.
const (
	axPlayer = iota
	axEnemy
	axTrail
	axGold
)

const (
	asterixSpawn = 10 // initial steps between spawns
	asterixMove  = 5  // initial steps between moves of the things
	// asterixRampPeriod is the steps between difficulty notches: MinAtar's
	// ramp_interval of 100 counts its timer down to -1 and notches on the
	// step after, so a notch comes every 102 steps.
	asterixRampPeriod = 102
	asterixLanes      = 8 // rows 1..8 each hold at most one thing
)

var asterixSpec = spec{
	name:     "asterix",
	channels: []string{"player", "enemy", "trail", "gold"},
	glyphs:   "PE-G",
	minimal:  []int32{Noop, Left, Up, Right, Down},
	newGame:  func(ramping bool) game { return &asterix{ramping: ramping} },
}

// asterixThing is an enemy or a piece of gold crossing a lane.
type asterixThing struct {
	runner
	live, gold bool
}

// asterix: the player moves in four directions over rows 1-8; enemies and
// gold cross the lanes from either side. Gold earns 1, an enemy ends the
// episode. Every 102 steps things spawn more often, and every 204 move
// faster.
type asterix struct {
	ramping  bool
	px, py   int
	lanes    [asterixLanes]asterixThing // lane i is row i+1
	pace     pace
	spawnDue int // steps until the next spawn
	moveDue  int // steps until the things move
	rampDue  int // steps until the next difficulty notch
}

func (g *asterix) reset(*rand.Rand) {
	*g = asterix{
		ramping:  g.ramping,
		px:       Size / 2,
		py:       Size / 2,
		pace:     pace{spawn: asterixSpawn, move: asterixMove},
		spawnDue: asterixSpawn,
		moveDue:  asterixMove,
		rampDue:  asterixRampPeriod,
	}
}

func (g *asterix) step(a int32, rng *rand.Rand) (reward int, terminal bool) {
	if g.spawnDue == 0 {
		g.spawn(rng)
		g.spawnDue = g.pace.spawn
	}
	switch a {
	case Left:
		g.px = max(0, g.px-1)
	case Right:
		g.px = min(Size-1, g.px+1)
	case Up:
		g.py = max(1, g.py-1)
	case Down:
		g.py = min(asterixLanes, g.py+1)
	}
	// The player can walk into a thing, and a thing can move onto the
	// player: contact is checked after each.
	for i := range g.lanes {
		reward, terminal = g.contact(&g.lanes[i], reward, terminal)
	}
	if g.moveDue == 0 {
		g.moveDue = g.pace.move
		for i := range g.lanes {
			t := &g.lanes[i]
			if !t.live {
				continue
			}
			t.move()
			if t.offGrid() {
				t.live = false
				continue
			}
			reward, terminal = g.contact(t, reward, terminal)
		}
	}
	g.spawnDue--
	g.moveDue--
	if g.ramping && g.pace.canRamp(1) {
		if g.rampDue--; g.rampDue == 0 {
			g.pace.harder(1)
			g.rampDue = asterixRampPeriod
		}
	}
	return reward, terminal
}

// contact resolves a thing on the player's cell: gold is picked up for 1,
// an enemy ends the episode.
func (g *asterix) contact(t *asterixThing, reward int, terminal bool) (int, bool) {
	if !t.live || !t.at(g.px, g.py) {
		return reward, terminal
	}
	if t.gold {
		t.live = false
		return reward + 1, terminal
	}
	return reward, true
}

// spawn puts a new thing, gold with probability 1/3, at the side of a lane
// chosen uniformly among the empty ones; if there are none it does nothing.
func (g *asterix) spawn(rng *rand.Rand) {
	gold := rng.IntN(3) == 0
	var free [asterixLanes]int
	n := 0
	for i, t := range g.lanes {
		if !t.live {
			free[n] = i
			n++
		}
	}
	if n == 0 {
		return
	}
	lane := free[rng.IntN(n)]
	g.lanes[lane] = asterixThing{runner: fromSide(rng, lane+1), live: true, gold: gold}
}

func (g *asterix) draw(o grid) {
	o.set(g.py, g.px, axPlayer)
	for _, t := range g.lanes {
		if !t.live {
			continue
		}
		ch := axEnemy
		if t.gold {
			ch = axGold
		}
		o.set(t.y, t.x, ch)
		o.set(t.y, t.trailX(), axTrail)
	}
}
