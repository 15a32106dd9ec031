package minatar

import "testing"

// quietFreeway returns a Freeway game whose cars are parked at column 0
// and never move, so the chicken (column 4) is safe.
func quietFreeway(t *testing.T) (*Env, *freeway) {
	e := exact(t, "freeway")
	g := e.game.(*freeway)
	for i := range g.cars {
		g.cars[i].x, g.cars[i].wait = 0, 1<<30
	}
	return e, g
}

func TestFreewayChicken(t *testing.T) {
	e, g := quietFreeway(t)
	// The chicken may move once every 3 steps: not in the first three
	// steps, then at steps 4, 7, 10, ...
	var rows []int
	for range 10 {
		step(t, e, Up)
		rows = append(rows, g.chicken)
	}
	want := []int{9, 9, 9, 8, 8, 8, 7, 7, 7, 6}
	for i := range want {
		if rows[i] != want[i] {
			t.Fatalf("rows %v, want %v", rows, want)
		}
	}
	step(t, e, Noop) // the wait runs down whatever the action
	step(t, e, Noop)
	step(t, e, Down)
	if g.chicken != 7 {
		t.Errorf("row %d after moving down, want 7", g.chicken)
	}
}

func TestFreewayRules(t *testing.T) {
	tests := []struct {
		name    string
		chicken int
		car     car // in its lane, row car.y
		action  int32
		reward  int
		row     int // the chicken's row after the step
		carX    int
	}{
		{"reach the top", 1, car{runner: runner{x: 0, y: 3, wait: 9}, speed: 3}, Up, 1, 9, 0},
		{"car moves onto the chicken", 6, car{runner: runner{x: 3, y: 6, right: true}, speed: 2}, Noop, 0, 9, 4},
		{"car moves away", 6, car{runner: runner{x: 4, y: 6, right: true}, speed: 2}, Noop, 0, 9, 5}, // hit before it moved
		{"chicken walks into a car", 7, car{runner: runner{x: 4, y: 6, wait: 5}, speed: 5}, Up, 0, 9, 4},
		{"car in another lane", 6, car{runner: runner{x: 3, y: 5, right: true}, speed: 2}, Noop, 0, 6, 4},
		{"car waits", 6, car{runner: runner{x: 3, y: 6, right: true, wait: 1}, speed: 2}, Noop, 0, 6, 3},
		{"wrap right", 9, car{runner: runner{x: 9, y: 2, right: true}, speed: 1}, Noop, 0, 9, 0},
		{"wrap left", 9, car{runner: runner{x: 0, y: 2}, speed: 1}, Noop, 0, 9, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, g := quietFreeway(t)
			g.chicken, g.moveDue = tc.chicken, 0
			g.cars[tc.car.y-1] = tc.car
			before := g.cars
			r, term := step(t, e, tc.action)
			c := g.cars[tc.car.y-1]
			if r != tc.reward || term || g.chicken != tc.row || c.x != tc.carX {
				t.Errorf("reward %d terminal %v chicken row %d car at %d; want %d false %d %d\n%s",
					r, term, g.chicken, c.x, tc.reward, tc.row, tc.carX, e.Render())
			}
			if tc.reward == 1 {
				// New speeds and directions, the same places.
				same := true
				for i := range g.cars {
					same = same && g.cars[i].speed == before[i].speed && g.cars[i].right == before[i].right
					if g.cars[i].x != before[i].x || g.cars[i].speed < 1 || g.cars[i].speed > 5 {
						t.Errorf("car %d: %+v before the crossing, %+v after", i, before[i], g.cars[i])
					}
				}
				if same {
					t.Error("crossing kept every car's speed and direction")
				}
			}
		})
	}
}

// TestFreewayCarSpeed checks that a car of speed class s moves once every
// s+1 steps and that its trail is in channel speed<s>, behind it, wrapped.
func TestFreewayCarSpeed(t *testing.T) {
	for s := 1; s <= freewaySpeeds; s++ {
		e, g := quietFreeway(t)
		g.cars[0] = car{runner: runner{x: 1, y: 1, wait: s}, speed: s}
		moves := 0
		for range 6 * (s + 1) {
			x := g.cars[0].x
			step(t, e, Noop)
			if g.cars[0].x != x {
				moves++
			}
		}
		if moves != 6 {
			t.Errorf("speed %d: %d moves in %d steps, want 6", s, moves, 6*(s+1))
		}
		x := g.cars[0].x
		if !cell(e, 1, x, fwCar) || !cell(e, 1, (x+1)%Size, fwSpeed1+s-1) {
			t.Errorf("speed %d, car at %d:\n%s", s, x, e.Render())
		}
	}
	e, g := quietFreeway(t)
	g.cars[2] = car{runner: runner{x: 0, y: 3, right: true, wait: 9}, speed: 4}
	step(t, e, Noop)
	if !cell(e, 3, Size-1, fwSpeed1+3) {
		t.Errorf("trail of a car at column 0 heading right is not at column 9:\n%s", e.Render())
	}
}

// TestFreewayTimeLimit: an episode lasts 2501 steps, as MinAtar's (its
// timer starts at 2500 and the episode ends when it passes below zero).
func TestFreewayTimeLimit(t *testing.T) {
	if FreewayMaxTime != 2501 {
		t.Fatalf("FreewayMaxTime %d, want MinAtar's 2501", FreewayMaxTime)
	}
	e := exact(t, "freeway")
	for i := 1; i <= FreewayMaxTime; i++ {
		// The chicken stays on the bottom row, where no car drives.
		if _, term := step(t, e, Down); term != (i == FreewayMaxTime) {
			t.Fatalf("step %d: terminated %v", i, term)
		}
	}
}

func TestFreewayReset(t *testing.T) {
	e := exact(t, "freeway")
	g := e.game.(*freeway)
	for i, c := range g.cars {
		if c.x != 0 || c.y != i+1 || c.speed < 1 || c.speed > 5 || c.wait != c.speed {
			t.Errorf("lane %d: %+v", i, c)
		}
	}
	if g.chicken != Size-1 || g.time != 0 {
		t.Errorf("chicken row %d, time %d", g.chicken, g.time)
	}
}

// TestFreewayCrossingRestartsCars: when the chicken crosses, every car's
// speed is drawn anew and its move countdown restarts at the new speed
// (MinAtar's _randomize_cars), so no car moves on the crossing step even
// if it was due to.
func TestFreewayCrossingRestartsCars(t *testing.T) {
	e, g := quietFreeway(t)
	for i := range g.cars {
		g.cars[i] = car{runner: runner{x: 2, y: i + 1, right: true}, speed: 3} // wait 0: due now
	}
	g.chicken, g.moveDue = 1, 0
	if r, _ := step(t, e, Up); r != 1 || g.chicken != Size-1 {
		t.Fatalf("crossing: reward %d, chicken at row %d", r, g.chicken)
	}
	for i, c := range g.cars {
		if c.x != 2 || c.wait != c.speed-1 {
			t.Errorf("lane %d after the crossing: %+v, want column 2 and a countdown of speed-1", i, c)
		}
	}
}
