package minatar

import "math/rand/v2"

// Space Invaders channels. The aliens are drawn twice: in "alien" and in
// the channel of the direction they are marching.
const (
	siCannon = iota
	siAlien
	siAlienLeft
	siAlienRight
	siFriendlyBullet
	siEnemyBullet
)

const (
	invaderMove       = 12 // initial steps between two marches of the wave
	invaderMinMove    = 6  // the fastest a new wave can start
	invaderShotPeriod = 10 // steps between two alien shots
	cannonCooldown    = 5  // steps between two shots of the cannon
	cannonStart       = 5
)

var invadersSpec = spec{
	name:     "space_invaders",
	channels: []string{"cannon", "alien", "alien_left", "alien_right", "friendly_bullet", "enemy_bullet"},
	glyphs:   "AM<>!v",
	minimal:  []int32{Noop, Left, Right, Fire},
	newGame:  func(ramping bool) game { return &invaders{ramping: ramping} },
}

// invaders: a cannon on the bottom row shoots up at a wave of 4x6 aliens
// that marches sideways and steps down a row at each edge, faster as it
// thins out; the alien above or nearest the cannon shoots down. A shot
// alien earns 1; an alien or alien bullet reaching the cannon, or the wave
// reaching the bottom, ends the episode. A cleared wave is replaced by a
// faster one.
type invaders struct {
	ramping  bool
	cannon   int
	aliens   plane
	shots    plane // the cannon's bullets, moving up
	bombs    plane // the aliens' bullets, moving down
	dir      int   // the wave's march: -1 left, +1 right
	period   int   // steps between marches of a full wave
	marchDue int
	bombDue  int
	shotDue  int
}

func (g *invaders) reset(*rand.Rand) {
	*g = invaders{
		ramping:  g.ramping,
		cannon:   cannonStart,
		dir:      -1,
		period:   invaderMove,
		marchDue: invaderMove,
		bombDue:  invaderShotPeriod,
	}
	g.newWave()
}

// newWave fills rows 0-3, columns 2-7, with aliens.
func (g *invaders) newWave() { g.aliens.fill(0, 4, 2, 8) }

func (g *invaders) step(a int32, _ *rand.Rand) (reward int, terminal bool) {
	switch a {
	case Fire:
		if g.shotDue == 0 {
			g.shots[Size-1][g.cannon] = true
			g.shotDue = cannonCooldown
		}
	case Left:
		g.cannon = max(0, g.cannon-1)
	case Right:
		g.cannon = min(Size-1, g.cannon+1)
	}
	g.shots.shiftRows(-1)
	g.bombs.shiftRows(1)
	hit := func() bool { return g.bombs[Size-1][g.cannon] || g.aliens[Size-1][g.cannon] }
	terminal = hit()

	if g.marchDue == 0 {
		// The wave marches faster as it thins out: with fewer aliens than
		// the period, every alien-count steps.
		g.marchDue = min(g.aliens.count(), g.period)
		edge := 0
		if g.dir > 0 {
			edge = Size - 1
		}
		if g.aliens.colAny(edge) {
			g.dir = -g.dir
			terminal = terminal || g.aliens.rowAny(Size-1)
			g.aliens.shiftRows(1)
		} else {
			g.aliens.shiftCols(g.dir)
		}
		terminal = terminal || hit()
	}
	if g.bombDue == 0 {
		g.bombDue = invaderShotPeriod
		g.drop()
	}

	// A bullet and an alien on one cell destroy each other.
	for r := range g.aliens {
		for c, v := range g.aliens[r] {
			if v && g.shots[r][c] {
				g.aliens[r][c], g.shots[r][c] = false, false
				reward++
			}
		}
	}

	if g.shotDue > 0 {
		g.shotDue--
	}
	g.marchDue--
	g.bombDue--
	if g.aliens.count() == 0 {
		if g.ramping && g.period > invaderMinMove {
			g.period--
		}
		g.newWave()
	}
	return reward, terminal
}

// drop fires a bullet from the lowest alien of the column nearest the
// cannon (the left one of two at equal distance).
func (g *invaders) drop() {
	for d := range Size {
		for _, c := range [2]int{g.cannon - d, g.cannon + d} {
			if c < 0 || c >= Size {
				continue
			}
			if r := g.aliens.lowest(c); r >= 0 {
				g.bombs[r][c] = true
				return
			}
		}
	}
}

func (g *invaders) draw(o grid) {
	o.set(Size-1, g.cannon, siCannon)
	g.aliens.draw(o, siAlien)
	if g.dir < 0 {
		g.aliens.draw(o, siAlienLeft)
	} else {
		g.aliens.draw(o, siAlienRight)
	}
	g.shots.draw(o, siFriendlyBullet)
	g.bombs.draw(o, siEnemyBullet)
}
