package minatar

import "math/rand/v2"

// Freeway channels: the chicken, the cars, and the trail behind each car
// in the channel of its speed (speed1 is the fastest).
const (
	fwChicken = iota
	fwCar
	fwSpeed1
)

const (
	chickenCol    = 4
	chickenPeriod = 3 // steps between two moves of the chicken
	freewayLanes  = 8 // rows 1..8, one car each
	freewaySpeeds = 5
	// FreewayMaxTime is the steps in an episode of Freeway: MinAtar's
	// time_limit of 2500 counts down to -1, ending the 2501st step.
	FreewayMaxTime = 2501
)

var freewaySpec = spec{
	name:     "freeway",
	channels: []string{"chicken", "car", "speed1", "speed2", "speed3", "speed4", "speed5"},
	glyphs:   "CX12345",
	minimal:  []int32{Noop, Up, Down},
	newGame:  func(bool) game { return new(freeway) },
}

// car is a car of a lane; a car of speed class s (1..5) moves one cell
// every s+1 steps and wraps around at the edges.
type car struct {
	runner
	speed int
}

// freeway: the chicken starts at the bottom of column 4 and crosses eight
// lanes of traffic; reaching the top earns 1 and starts it again from the
// bottom with new car speeds; a car hitting it sends it back to the bottom.
// The episode ends after 2501 steps.
type freeway struct {
	chicken int // its row
	moveDue int // steps until the chicken may move again
	time    int
	cars    [freewayLanes]car
}

func (g *freeway) reset(rng *rand.Rand) {
	*g = freeway{chicken: Size - 1, moveDue: chickenPeriod}
	for i := range g.cars {
		g.cars[i] = car{runner: runner{y: i + 1}}
	}
	g.shuffle(rng)
}

// shuffle draws every lane's speed class and direction anew, keeping the
// cars where they are; each car's move countdown restarts at its new
// speed, as MinAtar's _randomize_cars does.
func (g *freeway) shuffle(rng *rand.Rand) {
	for i := range g.cars {
		c := &g.cars[i]
		c.speed = 1 + rng.IntN(freewaySpeeds)
		c.right = coin(rng)
		c.wait = c.speed
	}
}

func (g *freeway) step(a int32, rng *rand.Rand) (reward int, terminal bool) {
	// The chicken moves at most once every chickenPeriod steps; an action
	// while it cannot is lost.
	if g.moveDue == 0 && (a == Up || a == Down) {
		g.moveDue = chickenPeriod
		if a == Up {
			g.chicken = max(0, g.chicken-1)
		} else {
			g.chicken = min(Size-1, g.chicken+1)
		}
	}
	if g.chicken == 0 {
		reward = 1
		g.shuffle(rng)
		g.chicken = Size - 1
	}
	for i := range g.cars {
		c := &g.cars[i]
		// A car hits the chicken by being in its cell, before or after
		// the car moves.
		g.hit(c)
		if c.tick(c.speed) {
			c.x = (c.x + Size) % Size
			g.hit(c)
		}
	}
	if g.moveDue > 0 {
		g.moveDue--
	}
	g.time++
	return reward, g.time >= FreewayMaxTime
}

// hit sends the chicken back to the bottom if c is on its cell.
func (g *freeway) hit(c *car) {
	if c.at(chickenCol, g.chicken) {
		g.chicken = Size - 1
	}
}

func (g *freeway) draw(o grid) {
	o.set(g.chicken, chickenCol, fwChicken)
	for _, c := range g.cars {
		o.set(c.y, c.x, fwCar)
		o.set(c.y, (c.trailX()+Size)%Size, fwSpeed1+c.speed-1)
	}
}
