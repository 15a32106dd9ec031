package minatar

import "testing"

// calmSea returns a Seaquest game with no spawns due, so only the objects
// a test places are in the water.
func calmSea(t *testing.T) (*Env, *seaquest) {
	e := exact(t, "seaquest")
	g := e.game.(*seaquest)
	g.enemyDue, g.diverDue = 1000, 1000
	return e, g
}

func TestSeaquestSurfacing(t *testing.T) {
	tests := []struct {
		name      string
		divers    int
		oxygen    int
		reward    int
		terminal  bool
		diversTo  int
		oxygenTo  int
		rampSpawn int // the enemy spawn period after surfacing
	}{
		{"with a diver", 1, 50, 0, false, 0, maxOxygen, seaquestSpawn - 1},
		{"with 3 divers", 3, 120, 0, false, 2, maxOxygen, seaquestSpawn - 1},
		// A rescue leaves -1 aboard, as MinAtar's does (TestSeaquestRescueLeavesMinusOne).
		{"with 6 divers", 6, 101, 5, false, -1, maxOxygen, seaquestSpawn - 1},
		{"with 6 divers and a full tank", 6, 199, 9, false, -1, maxOxygen, seaquestSpawn - 1},
		{"with none", 0, 50, 0, true, 0, 50, seaquestSpawn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, g := calmSea(t)
			g.y, g.surfaced, g.divers, g.oxygen = 1, false, tc.divers, tc.oxygen
			r, term := step(t, e, Up)
			if g.y != 0 || r != tc.reward || term != tc.terminal || g.divers != tc.diversTo || g.oxygen != tc.oxygenTo || g.pace.spawn != tc.rampSpawn {
				t.Errorf("row %d reward %d terminal %v divers %d oxygen %d spawn period %d; want 0 %d %v %d %d %d",
					g.y, r, term, g.divers, g.oxygen, g.pace.spawn, tc.reward, tc.terminal, tc.diversTo, tc.oxygenTo, tc.rampSpawn)
			}
			if term {
				return
			}
			// Staying at the surface is not surfacing again.
			if r, term := step(t, e, Noop); r != 0 || term || g.oxygen != maxOxygen {
				t.Errorf("a step at the surface: reward %d terminal %v oxygen %d", r, term, g.oxygen)
			}
		})
	}
}

func TestSeaquestOxygen(t *testing.T) {
	e, g := calmSea(t)
	step(t, e, Down)
	if g.oxygen != maxOxygen-1 {
		t.Fatalf("oxygen %d after a step under water", g.oxygen)
	}
	// 200 steps under water are allowed; the 201st drowns the submarine.
	for i := 2; ; i++ {
		_, term := step(t, e, Noop)
		if term != (i == maxOxygen+1) {
			t.Fatalf("step %d under water: terminated %v (oxygen %d)", i, term, g.oxygen)
		}
		if term {
			break
		}
		if i == maxOxygen/2 && !cell(e, Size-1, 4, sqOxygenGauge) || cell(e, Size-1, 5, sqOxygenGauge) && i > maxOxygen/2 {
			t.Fatalf("step %d, oxygen %d: gauge\n%s", i, g.oxygen, e.Render())
		}
	}
}

func TestSeaquestCombat(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(g *seaquest)
		action   int32
		reward   int
		terminal bool
		check    func(g *seaquest) bool
	}{
		{"torpedo hits a fish", func(g *seaquest) {
			g.fish = append(g.fish, runner{x: 6, y: 4, wait: 3})
		}, Fire, 1, false, func(g *seaquest) bool { return len(g.fish) == 0 && len(g.torps) == 0 }},
		{"torpedo hits a sub", func(g *seaquest) {
			g.subs = append(g.subs, enemySub{runner: runner{x: 6, y: 4, wait: 3}, shotDue: 5})
		}, Fire, 1, false, func(g *seaquest) bool { return len(g.subs) == 0 && len(g.torps) == 0 }},
		{"fish swims onto a torpedo", func(g *seaquest) {
			g.torps = append(g.torps, runner{x: 7, y: 4, right: true})
			g.fish = append(g.fish, runner{x: 9, y: 4})
		}, Noop, 1, false, func(g *seaquest) bool { return len(g.fish) == 0 && len(g.torps) == 0 }},
		{"torpedo misses", func(g *seaquest) {
			g.fish = append(g.fish, runner{x: 8, y: 4, wait: 3})
		}, Fire, 0, false, func(g *seaquest) bool { return len(g.fish) == 1 && g.torps[0].x == 6 }},
		{"torpedo leaves the grid", func(g *seaquest) {
			g.torps = append(g.torps, runner{x: 9, y: 2, right: true})
		}, Noop, 0, false, func(g *seaquest) bool { return len(g.torps) == 0 }},
		{"torpedo fires the way the sub faces", func(g *seaquest) { g.right = false }, Fire, 0, false,
			func(g *seaquest) bool { return len(g.torps) == 1 && g.torps[0].x == 4 && !g.torps[0].right }},
		{"fish swims into the sub", func(g *seaquest) {
			g.fish = append(g.fish, runner{x: 6, y: 4})
		}, Noop, 0, true, nil},
		{"sub drives into a fish", func(g *seaquest) {
			g.fish = append(g.fish, runner{x: 5, y: 5, wait: 3})
		}, Down, 0, true, nil},
		{"enemy sub rams the sub", func(g *seaquest) {
			g.subs = append(g.subs, enemySub{runner: runner{x: 4, y: 4, right: true}, shotDue: 5})
		}, Noop, 0, true, nil},
		{"enemy bullet", func(g *seaquest) {
			g.bullets = append(g.bullets, runner{x: 7, y: 4})
			g.right = false
		}, Right, 0, true, nil},
		{"enemy sub shoots", func(g *seaquest) {
			g.subs = append(g.subs, enemySub{runner: runner{x: 1, y: 7, right: true, wait: 3}})
		}, Noop, 0, false, func(g *seaquest) bool {
			return len(g.bullets) == 1 && g.bullets[0] == runner{x: 2, y: 7, right: true} && g.subs[0].shotDue == enemyShotPeriod
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, g := calmSea(t)
			g.x, g.y, g.right = 5, 4, true
			tc.setup(g)
			r, term := step(t, e, tc.action)
			if r != tc.reward || term != tc.terminal || tc.check != nil && !tc.check(g) {
				t.Errorf("reward %d terminal %v, want %d %v; state %+v\n%s", r, term, tc.reward, tc.terminal, g, e.Render())
			}
		})
	}
}

func TestSeaquestShotCooldown(t *testing.T) {
	e, g := calmSea(t)
	g.y = 4
	shots := 0
	for range 12 {
		step(t, e, Fire)
		if g.shotDue == subShotCooldown-1 { // fired this step
			shots++
		}
	}
	// One torpedo every 5 steps: at steps 1, 6 and 11.
	if shots != 3 {
		t.Errorf("%d torpedoes in 12 steps of fire, want 3", shots)
	}
}

func TestSeaquestDivers(t *testing.T) {
	e, g := calmSea(t)
	g.x, g.y, g.surfaced = 3, 6, false
	g.swimmers = append(g.swimmers, runner{x: 4, y: 6, wait: 0})
	step(t, e, Noop) // the diver swims left onto the sub
	if g.divers != 1 || len(g.swimmers) != 0 {
		t.Fatalf("divers aboard %d, in the water %d", g.divers, len(g.swimmers))
	}
	if !cell(e, Size-1, Size-2, sqDiverGauge) || cell(e, Size-1, Size-3, sqDiverGauge) {
		t.Errorf("diver gauge for 1 diver:\n%s", e.Render())
	}
	g.divers = maxDivers
	g.swimmers = append(g.swimmers, runner{x: 3, y: 6, wait: 4})
	step(t, e, Noop)
	if g.divers != maxDivers || len(g.swimmers) != 1 {
		t.Errorf("a full sub: divers aboard %d, in the water %d", g.divers, len(g.swimmers))
	}
	// Divers spawn every 30 steps at a side of rows 1-8, at the start of
	// the step after the timer ran out.
	e, g = calmSea(t)
	g.diverDue = diverSpawnPeriod
	for range diverSpawnPeriod + 1 {
		step(t, e, Noop)
	}
	if len(g.swimmers) != 1 || g.swimmers[0].y < 1 || g.swimmers[0].y > seaBottom {
		t.Errorf("divers after 30 steps: %+v", g.swimmers)
	}
}

// TestSeaquestSpawn: MinAtar refuses a new enemy only in a row where an
// enemy already moves the opposite way; enemies moving the same way share
// a row.
func TestSeaquestSpawn(t *testing.T) {
	e, g := calmSea(t)
	for y := 1; y <= seaBottom; y++ {
		g.fish = append(g.fish, runner{x: 4, y: y, right: true, wait: 99})
	}
	const tries = 400
	for range tries {
		g.spawnEnemy(e.rng)
	}
	spawned := len(g.fish) + len(g.subs) - seaBottom
	for _, f := range g.fish {
		if !f.right {
			t.Fatalf("a fish spawned against the row's traffic: %+v", f)
		}
	}
	for _, s := range g.subs {
		if !s.right || s.x != 0 {
			t.Fatalf("a submarine spawned against the row's traffic: %+v", s)
		}
	}
	// About half the draws come from the right and are refused.
	if spawned < tries/4 || spawned > 3*tries/4 || len(g.subs) == 0 {
		t.Errorf("%d of %d spawns placed (%d submarines), want about half", spawned, tries, len(g.subs))
	}
}

// TestSeaquestSpawnTiming: a spawn falls due at the end of a step and
// happens at the start of the next, as in MinAtar, so the new enemy first
// shows one step after the timer ran out.
func TestSeaquestSpawnTiming(t *testing.T) {
	e, g := calmSea(t)
	g.enemyDue, g.diverDue = 1, 1
	step(t, e, Noop)
	if len(g.fish)+len(g.subs)+len(g.swimmers) != 0 || g.enemyDue != 0 {
		t.Fatalf("spawned on the step the timer ran out: %+v", g)
	}
	step(t, e, Noop)
	if len(g.fish)+len(g.subs) != 1 || len(g.swimmers) != 1 || g.enemyDue != seaquestSpawn-1 || g.diverDue != diverSpawnPeriod-1 {
		t.Fatalf("after the next step: %d fish, %d subs, %d divers; timers %d %d", len(g.fish), len(g.subs), len(g.swimmers), g.enemyDue, g.diverDue)
	}
}

// TestSeaquestTorpedoSinksOne: two fish on one cell; a torpedo sinks one
// of them and the other swims on.
func TestSeaquestTorpedoSinksOne(t *testing.T) {
	e, g := calmSea(t)
	g.x, g.y, g.right = 5, 4, true
	g.fish = append(g.fish, runner{x: 6, y: 4, wait: 9}, runner{x: 6, y: 4, wait: 9})
	if r, term := step(t, e, Fire); r != 1 || term || len(g.fish) != 1 || len(g.torps) != 0 {
		t.Errorf("reward %d terminal %v fish %d torpedoes %d, want 1 false 1 0", r, term, len(g.fish), len(g.torps))
	}
}

// TestSeaquestSunkSubShoots: a submarine that moves onto a torpedo sinks,
// and its gun, due that step, still fires (MinAtar runs the gun after the
// move whatever became of the submarine).
func TestSeaquestSunkSubShoots(t *testing.T) {
	e, g := calmSea(t)
	g.x, g.y = 2, 7
	g.torps = append(g.torps, runner{x: 6, y: 4, right: true})
	g.subs = append(g.subs, enemySub{runner: runner{x: 8, y: 4}})
	r, term := step(t, e, Noop)
	if r != 1 || term || len(g.subs) != 0 || len(g.torps) != 0 {
		t.Fatalf("reward %d terminal %v subs %d torpedoes %d, want 1 false 0 0", r, term, len(g.subs), len(g.torps))
	}
	if len(g.bullets) != 1 || g.bullets[0] != (runner{x: 6, y: 4}) {
		t.Errorf("bullets %+v, want one fired from column 7 and moved to 6", g.bullets)
	}
}

// TestSeaquestRescueLeavesMinusOne: after a rescue of 6 divers MinAtar's
// count is -1 (it empties the sub, then takes a diver as on any
// surfacing), so the next surfacing without a diver does not end the
// episode, and the count keeps going down.
func TestSeaquestRescueLeavesMinusOne(t *testing.T) {
	e, g := calmSea(t)
	g.y, g.surfaced, g.divers, g.oxygen = 1, false, maxDivers, 100
	if r, term := step(t, e, Up); r != 5 || term || g.divers != -1 {
		t.Fatalf("rescue: reward %d terminal %v divers %d, want 5 false -1", r, term, g.divers)
	}
	if cell(e, Size-1, Size-2, sqDiverGauge) {
		t.Errorf("the diver gauge shows a diver at -1:\n%s", e.Render())
	}
	step(t, e, Down)
	if r, term := step(t, e, Up); r != 0 || term || g.divers != -2 {
		t.Fatalf("surfacing empty after a rescue: reward %d terminal %v divers %d, want 0 false -2", r, term, g.divers)
	}
}

// TestSeaquestDrownsSurfacing: the tank is checked before the step's
// breath, so a submarine whose oxygen ran out on the previous step drowns
// on this one even as it reaches the surface with a diver aboard.
func TestSeaquestDrownsSurfacing(t *testing.T) {
	e, g := calmSea(t)
	g.y, g.surfaced, g.divers, g.oxygen = 2, false, 1, 1
	if _, term := step(t, e, Up); term || g.oxygen != 0 {
		t.Fatalf("the last breath: terminal %v oxygen %d", term, g.oxygen)
	}
	if _, term := step(t, e, Up); !term || g.y != 0 {
		t.Errorf("surfacing on an empty tank: terminal %v row %d, want true 0", term, g.y)
	}
}

func TestSeaquestObservation(t *testing.T) {
	e, g := calmSea(t)
	g.fish = append(g.fish, runner{x: 3, y: 2, wait: 9})
	g.subs = append(g.subs, enemySub{runner: runner{x: 5, y: 3, right: true, wait: 9}, shotDue: 9})
	g.swimmers = append(g.swimmers, runner{x: 8, y: 7, wait: 9})
	step(t, e, Right)
	for _, c := range []struct{ row, col, ch int }{
		{0, 6, sqSubFront}, {0, 5, sqSubBack}, {2, 3, sqEnemyFish}, {2, 4, sqTrail},
		{3, 5, sqEnemySub}, {3, 4, sqTrail}, {7, 8, sqDiver}, {7, 9, sqTrail}, {9, 9, sqOxygenGauge},
	} {
		if !cell(e, c.row, c.col, c.ch) {
			t.Errorf("channel %d not set at %d,%d:\n%s", c.ch, c.row, c.col, e.Render())
		}
	}
	// At the left edge facing right, the back would be off the grid.
	g.x = 0
	e.observe()
	for c := range Size {
		if cell(e, 0, c, sqSubBack) {
			t.Errorf("back drawn at column %d:\n%s", c, e.Render())
		}
	}
}
