package minatar

import (
	"testing"

	"github.com/distrl/distrl/internal/testsupport/stattest"
)

// asterixAt returns an Asterix game with the player at (5, 5), no things,
// no spawns due, and a thing placed by put (if any).
func asterixAt(t *testing.T, put *asterixThing) (*Env, *asterix) {
	e := exact(t, "asterix")
	g := e.game.(*asterix)
	g.spawnDue = 1000
	if put != nil {
		put.live = true
		g.lanes[put.y-1] = *put
	}
	return e, g
}

func TestAsterixRules(t *testing.T) {
	tests := []struct {
		name     string
		thing    *asterixThing
		moveDue  int
		action   int32
		reward   int
		terminal bool
		left     bool // the thing is still there
		player   [2]int
	}{
		{"walk into gold", &asterixThing{runner: runner{x: 6, y: 5}, gold: true}, 3, Right, 1, false, false, [2]int{6, 5}},
		{"walk into an enemy", &asterixThing{runner: runner{x: 5, y: 4}}, 3, Up, 0, true, true, [2]int{5, 4}},
		{"gold moves onto the player", &asterixThing{runner: runner{x: 4, y: 5, right: true}, gold: true}, 0, Noop, 1, false, false, [2]int{5, 5}},
		{"enemy moves onto the player", &asterixThing{runner: runner{x: 6, y: 5}}, 0, Noop, 0, true, true, [2]int{5, 5}},
		{"enemy waits its turn", &asterixThing{runner: runner{x: 6, y: 5}}, 1, Noop, 0, false, true, [2]int{5, 5}},
		{"dodge", &asterixThing{runner: runner{x: 6, y: 5}}, 0, Down, 0, false, true, [2]int{5, 6}},
		{"thing leaves the grid", &asterixThing{runner: runner{x: 9, y: 2, right: true}}, 0, Noop, 0, false, false, [2]int{5, 5}},
		{"left", nil, 3, Left, 0, false, false, [2]int{4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, g := asterixAt(t, tc.thing)
			g.moveDue = tc.moveDue
			r, term := step(t, e, tc.action)
			left := tc.thing != nil && g.lanes[tc.thing.y-1].live
			if r != tc.reward || term != tc.terminal || left != tc.left || [2]int{g.px, g.py} != tc.player {
				t.Errorf("reward %d terminal %v thing left %v player %d,%d; want %d %v %v %v\n%s",
					r, term, left, g.px, g.py, tc.reward, tc.terminal, tc.left, tc.player, e.Render())
			}
		})
	}
}

func TestAsterixBounds(t *testing.T) {
	e, g := asterixAt(t, nil)
	for range 12 {
		step(t, e, Up)
	}
	if g.py != 1 {
		t.Errorf("player row %d after going up, want 1 (row 0 is off limits)", g.py)
	}
	for range 12 {
		step(t, e, Down)
	}
	for range 12 {
		step(t, e, Left)
	}
	if g.py != 8 || g.px != 0 {
		t.Errorf("player at %d,%d, want 0,8 (row 9 is off limits)", g.px, g.py)
	}
}

// TestAsterixSpawn spawns many things: each enters a free lane at a side
// heading inwards, a third are gold, and a full grid takes no more.
func TestAsterixSpawn(t *testing.T) {
	e, g := asterixAt(t, nil)
	gold := 0
	const n = 3000
	for i := range n {
		g.lanes = [asterixLanes]asterixThing{}
		g.lanes[i%asterixLanes] = asterixThing{live: true, runner: runner{x: 3, y: i%asterixLanes + 1}}
		g.spawn(e.rng)
		spawned := 0
		for lane, th := range g.lanes {
			if !th.live || lane == i%asterixLanes {
				continue
			}
			spawned++
			if th.y != lane+1 || !(th.x == 0 && th.right || th.x == Size-1 && !th.right) {
				t.Fatalf("spawned %+v in lane %d", th, lane)
			}
			if th.gold {
				gold++
			}
		}
		if spawned != 1 {
			t.Fatalf("%d things spawned", spawned)
		}
	}
	if _, _, p, err := stattest.ChiSquare([]int{gold, n - gold}, []float64{1. / 3, 2. / 3}); err != nil || p < 0.001 {
		t.Errorf("%d gold of %d spawns (p = %v, %v)", gold, n, p, err)
	}
	for i := range g.lanes {
		g.lanes[i].live = true
	}
	before := g.lanes
	g.spawn(e.rng)
	if g.lanes != before {
		t.Error("a spawn into full lanes changed them")
	}
}

// TestAsterixRamp checks the difficulty: spawns one step sooner every 102
// steps, moves one step sooner every 204, down to every step; off without
// ramping. MinAtar's ramp timer starts at 100 and notches when it has
// passed below zero, on the 102nd step.
func TestAsterixRamp(t *testing.T) {
	for _, ramping := range []bool{true, false} {
		o := DefaultOptions()
		o.Sticky, o.Ramping = 0, ramping
		e := newEnv(t, "asterix", o)
		g := e.game.(*asterix)
		want := map[int]pace{
			100:  {spawn: 10, move: 5},
			101:  {spawn: 10, move: 5},
			102:  {spawn: 9, move: 5, notches: 1},
			203:  {spawn: 9, move: 5, notches: 1},
			204:  {spawn: 8, move: 4, notches: 2},
			408:  {spawn: 6, move: 3, notches: 4},
			2000: {spawn: 1, move: 1, notches: 9},
		}
		for i := 1; i <= 2000; i++ {
			g.lanes = [asterixLanes]asterixThing{} // nothing can end the episode
			if _, term := step(t, e, Noop); term {
				t.Fatal("terminated")
			}
			w, ok := want[i]
			if !ok {
				continue
			}
			if !ramping {
				w = pace{spawn: asterixSpawn, move: asterixMove}
			}
			if g.pace != w {
				t.Errorf("ramping %v, step %d: pace %+v, want %+v", ramping, i, g.pace, w)
			}
		}
	}
}

func TestAsterixObservation(t *testing.T) {
	e, g := asterixAt(t, &asterixThing{runner: runner{x: 0, y: 3, right: true}, gold: true})
	g.lanes[6] = asterixThing{live: true, runner: runner{x: 7, y: 7}}
	g.moveDue = 0
	step(t, e, Noop) // both move one cell
	for _, c := range []struct{ row, col, ch int }{
		{5, 5, axPlayer}, {3, 1, axGold}, {3, 0, axTrail}, {7, 6, axEnemy}, {7, 7, axTrail},
	} {
		if !cell(e, c.row, c.col, c.ch) {
			t.Errorf("channel %d not set at %d,%d:\n%s", c.ch, c.row, c.col, e.Render())
		}
	}
}
