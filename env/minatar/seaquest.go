package minatar

import (
	"math/rand/v2"
	"slices"
)

// Seaquest channels.
const (
	sqSubFront = iota
	sqSubBack
	sqFriendlyBullet
	sqTrail
	sqEnemyBullet
	sqEnemyFish
	sqEnemySub
	sqOxygenGauge
	sqDiverGauge
	sqDiver
)

const (
	maxOxygen        = 200
	maxDivers        = 6
	seaquestSpawn    = 20 // initial steps between enemy spawns
	seaquestMove     = 5  // initial move period of enemies (a move every 6 steps)
	seaquestMinMove  = 2  // the fastest enemies move every 3 steps
	diverSpawnPeriod = 30
	diverMovePeriod  = 5
	subShotCooldown  = 5        // steps between two shots of the player
	enemyShotPeriod  = 10       // steps between two shots of an enemy submarine
	seaBottom        = Size - 2 // row 9 holds the gauges
)

var seaquestSpec = spec{
	name: "seaquest",
	channels: []string{"sub_front", "sub_back", "friendly_bullet", "trail", "enemy_bullet",
		"enemy_fish", "enemy_sub", "oxygen_gauge", "diver_gauge", "diver"},
	glyphs:  "Ss*-+FUo=D",
	minimal: []int32{Noop, Left, Up, Right, Down, Fire},
	newGame: func(ramping bool) game { return newSeaquest(ramping) },
}

// enemySub is an enemy submarine: it moves like a fish and shoots.
type enemySub struct {
	runner
	shotDue int
}

// seaquest: the player's submarine starts at the surface (row 0) and moves
// in four directions down to row 8, shooting torpedoes sideways. Fish and
// enemy submarines cross rows 1-8 and end the episode on contact, as do
// the enemy submarines' bullets; a torpedo that hits one earns 1. Divers
// cross too and are picked up on contact, up to 6. Under water the oxygen
// runs down; surfacing with a diver refills it and costs the diver, or,
// with all 6, rescues them for a bonus of the oxygen left (1 per tenth);
// surfacing with none, or running out of oxygen, ends the episode. Each
// surfacing makes the enemies come more often and faster.
type seaquest struct {
	ramping  bool
	x, y     int
	right    bool // facing
	oxygen   int
	divers   int  // aboard
	surfaced bool // at the surface since the last surfacing
	torps    []runner
	bullets  []runner
	fish     []runner
	subs     []enemySub
	swimmers []runner // divers in the water
	pace     pace
	enemyDue int
	diverDue int
	shotDue  int
}

// newSeaquest sizes the object lists for what a game holds at its
// hardest, so that steps append without allocating: a spawn every step
// and a move every third leave about 30 enemies in the sea, their bullets
// fewer. A list that outgrows its room keeps the larger one.
func newSeaquest(ramping bool) *seaquest {
	return &seaquest{
		ramping:  ramping,
		torps:    make([]runner, 0, 4),
		bullets:  make([]runner, 0, 48),
		fish:     make([]runner, 0, 48),
		subs:     make([]enemySub, 0, 48),
		swimmers: make([]runner, 0, 8),
	}
}

func (g *seaquest) reset(*rand.Rand) {
	*g = seaquest{
		ramping:  g.ramping,
		x:        Size / 2,
		oxygen:   maxOxygen,
		surfaced: true,
		torps:    g.torps[:0],
		bullets:  g.bullets[:0],
		fish:     g.fish[:0],
		subs:     g.subs[:0],
		swimmers: g.swimmers[:0],
		pace:     pace{spawn: seaquestSpawn, move: seaquestMove},
		enemyDue: seaquestSpawn,
		diverDue: diverSpawnPeriod,
	}
}

// step follows MinAtar's order of play: spawns that are due, the player's
// action, then torpedoes, divers, enemy submarines, enemy bullets and fish
// in turn, each list walked newest first, then the timers, the oxygen and
// the surfacing.
func (g *seaquest) step(a int32, rng *rand.Rand) (reward int, terminal bool) {
	if g.enemyDue == 0 {
		g.spawnEnemy(rng)
		g.enemyDue = g.pace.spawn
	}
	if g.diverDue == 0 {
		g.swimmers = append(g.swimmers, fromSide(rng, 1+rng.IntN(seaBottom)))
		g.swimmers[len(g.swimmers)-1].wait = diverMovePeriod
		g.diverDue = diverSpawnPeriod
	}

	switch a {
	case Fire:
		if g.shotDue == 0 {
			g.torps = append(g.torps, runner{x: g.x, y: g.y, right: g.right})
			g.shotDue = subShotCooldown
		}
	case Left:
		g.x, g.right = max(0, g.x-1), false
	case Right:
		g.x, g.right = min(Size-1, g.x+1), true
	case Up:
		g.y = max(0, g.y-1)
	case Down:
		g.y = min(seaBottom, g.y+1)
	}

	// A torpedo moves a cell and sinks one enemy on its new cell, a fish
	// before a submarine.
	for i := len(g.torps) - 1; i >= 0; i-- {
		t := &g.torps[i]
		t.move()
		switch {
		case t.offGrid():
			g.torps = slices.Delete(g.torps, i, i+1)
		case sinkOne(&g.fish, t.x, t.y) || sinkOne(&g.subs, t.x, t.y):
			g.torps = slices.Delete(g.torps, i, i+1)
			reward++
		}
	}

	// Divers are picked up when the submarine is on their cell, before or
	// after they move, if it has room.
	for i := len(g.swimmers) - 1; i >= 0; i-- {
		d := &g.swimmers[i]
		if g.pickUp(*d) || d.tick(diverMovePeriod) && (d.offGrid() || g.pickUp(*d)) {
			g.swimmers = slices.Delete(g.swimmers, i, i+1)
		}
	}

	// Enemies hit the submarine by sharing its cell before or after they
	// move, and sink if they move onto a torpedo. A submarine's gun works
	// on the step it leaves the grid or sinks too, as in MinAtar (a
	// bullet fired off the grid is gone before anything sees it).
	for i := len(g.subs) - 1; i >= 0; i-- {
		s := g.subs[i]
		gone, hit, sunk := g.advance(&s.runner)
		terminal = hit || terminal
		if sunk {
			reward++
		}
		if s.shotDue > 0 {
			s.shotDue--
		} else {
			s.shotDue = enemyShotPeriod
			if !s.offGrid() {
				g.bullets = append(g.bullets, runner{x: s.x, y: s.y, right: s.right})
			}
		}
		if gone {
			g.subs = slices.Delete(g.subs, i, i+1)
		} else {
			g.subs[i] = s
		}
	}
	for i := len(g.bullets) - 1; i >= 0; i-- {
		b := &g.bullets[i]
		terminal = b.at(g.x, g.y) || terminal
		b.move()
		if b.offGrid() {
			g.bullets = slices.Delete(g.bullets, i, i+1)
		} else if b.at(g.x, g.y) {
			terminal = true
		}
	}
	for i := len(g.fish) - 1; i >= 0; i-- {
		gone, hit, sunk := g.advance(&g.fish[i])
		terminal = hit || terminal
		if sunk {
			reward++
		}
		if gone {
			g.fish = slices.Delete(g.fish, i, i+1)
		}
	}

	g.enemyDue = max(0, g.enemyDue-1)
	g.diverDue = max(0, g.diverDue-1)
	g.shotDue = max(0, g.shotDue-1)
	// The tank is checked before this step's breath: a submarine whose
	// oxygen ran out on the previous step drowns, even as it surfaces.
	if g.oxygen <= 0 {
		terminal = true
	}
	if g.y > 0 {
		g.oxygen--
		g.surfaced = false
	} else if !g.surfaced {
		if g.divers == 0 {
			terminal = true
		} else {
			reward += g.surface()
		}
	}
	return reward, terminal
}

// advance moves an enemy, a fish or a submarine's hull, as MinAtar does:
// it hits the player by sharing its cell before or after its move (if
// one is due), and sinks on a torpedo it moves onto, taking the torpedo.
// gone reports that it left the grid or sank.
func (g *seaquest) advance(e *runner) (gone, hit, sunk bool) {
	hit = e.at(g.x, g.y)
	if !e.tick(g.pace.move) {
		return false, hit, false
	}
	switch {
	case e.offGrid():
		return true, hit, false
	case e.at(g.x, g.y):
		return false, true, false
	case sinkOne(&g.torps, e.x, e.y):
		return true, hit, true
	}
	return false, hit, false
}

// sinkOne removes the first object of *list at (x, y) and reports whether
// there was one: a torpedo sinks one enemy, an enemy takes one torpedo.
func sinkOne[T interface{ at(x, y int) bool }](list *[]T, x, y int) bool {
	for i, o := range *list {
		if o.at(x, y) {
			*list = slices.Delete(*list, i, i+1)
			return true
		}
	}
	return false
}

// pickUp takes diver d aboard if the submarine is on its cell and has room.
func (g *seaquest) pickUp(d runner) bool {
	if !d.at(g.x, g.y) || g.divers >= maxDivers {
		return false
	}
	g.divers++
	return true
}

// surface refills the oxygen and ramps the difficulty. With a full load
// the divers are rescued for a bonus of the oxygen gauge's cells; with
// fewer one diver is used up. As in MinAtar, a rescue also takes one
// diver: the count goes to -1 (and lower on later surfacings), so after a
// rescue the submarine may surface empty without dying until its divers
// aboard count back up past zero.
func (g *seaquest) surface() int {
	g.surfaced = true
	bonus := 0
	if g.divers == maxDivers {
		bonus = g.oxygenCells()
		g.divers = 0
	}
	g.divers--
	g.oxygen = maxOxygen
	if g.ramping && g.pace.canRamp(seaquestMinMove) {
		g.pace.harder(seaquestMinMove)
	}
	return bonus
}

// oxygenCells is the length of the oxygen gauge: a cell per tenth of the
// tank, rounded down.
func (g *seaquest) oxygenCells() int { return max(0, g.oxygen) * Size / maxOxygen }

// spawnEnemy sends a fish, or with probability 1/3 a submarine, into a row
// chosen uniformly from 1-8, from a random side; if an enemy in that row
// moves the other way, nothing spawns (enemies moving the same way share
// rows).
func (g *seaquest) spawnEnemy(rng *rand.Rand) {
	r := fromSide(rng, 1+rng.IntN(seaBottom))
	isSub := rng.IntN(3) == 0
	r.wait = g.pace.move
	for _, f := range g.fish {
		if f.y == r.y && f.right != r.right {
			return
		}
	}
	for _, s := range g.subs {
		if s.y == r.y && s.right != r.right {
			return
		}
	}
	if isSub {
		g.subs = append(g.subs, enemySub{runner: r, shotDue: enemyShotPeriod})
	} else {
		g.fish = append(g.fish, r)
	}
}

func (g *seaquest) draw(o grid) {
	o.set(g.y, g.x, sqSubFront)
	back := g.x + 1
	if g.right {
		back = g.x - 1
	}
	o.set(g.y, back, sqSubBack) // not drawn when it would be off the grid
	for _, t := range g.torps {
		o.set(t.y, t.x, sqFriendlyBullet)
	}
	for _, b := range g.bullets {
		o.set(b.y, b.x, sqEnemyBullet)
	}
	trailed := func(r runner, ch int) {
		o.set(r.y, r.x, ch)
		o.set(r.y, r.trailX(), sqTrail)
	}
	for _, f := range g.fish {
		trailed(f, sqEnemyFish)
	}
	for _, s := range g.subs {
		trailed(s.runner, sqEnemySub)
	}
	for _, d := range g.swimmers {
		trailed(d, sqDiver)
	}
	for c := range g.oxygenCells() {
		o.set(Size-1, c, sqOxygenGauge)
	}
	for c := Size - 1 - g.divers; c < Size-1; c++ {
		o.set(Size-1, c, sqDiverGauge)
	}
}
