package minatar

import "testing"

// cells returns a plane with the given (row, col) cells set.
func cells(rc ...[2]int) plane {
	var p plane
	for _, c := range rc {
		p[c[0]][c[1]] = true
	}
	return p
}

func TestInvadersRules(t *testing.T) {
	tests := []struct {
		name     string
		aliens   plane
		shots    plane
		bombs    plane
		march    bool // the wave marches this step
		dir      int
		action   int32
		reward   int
		terminal bool
		after    plane // the aliens after the step
	}{
		{"shoot an alien", cells([2]int{3, 5}, [2]int{0, 0}), cells([2]int{4, 5}), plane{}, false, -1, Noop, 1, false, cells([2]int{0, 0})},
		{"miss", cells([2]int{3, 5}), cells([2]int{4, 6}), plane{}, false, -1, Noop, 0, false, cells([2]int{3, 5})},
		{"alien bullet hits the cannon", cells([2]int{0, 0}), plane{}, cells([2]int{8, 5}), false, -1, Noop, 0, true, cells([2]int{0, 0})},
		{"cannon dodges", cells([2]int{0, 0}), plane{}, cells([2]int{8, 5}), false, -1, Right, 0, false, cells([2]int{0, 0})},
		{"cannon moves into a bullet", cells([2]int{0, 0}), plane{}, cells([2]int{8, 6}), false, -1, Right, 0, true, cells([2]int{0, 0})},
		{"march left", cells([2]int{2, 3}, [2]int{2, 4}), plane{}, plane{}, true, -1, Noop, 0, false, cells([2]int{2, 2}, [2]int{2, 3})},
		{"march right", cells([2]int{2, 3}), plane{}, plane{}, true, 1, Noop, 0, false, cells([2]int{2, 4})},
		{"step down at the edge", cells([2]int{2, 0}, [2]int{1, 4}), plane{}, plane{}, true, -1, Noop, 0, false, cells([2]int{3, 0}, [2]int{2, 4})},
		{"alien lands on the cannon", cells([2]int{8, 5}, [2]int{8, 9}), plane{}, plane{}, true, 1, Noop, 0, true, cells([2]int{9, 5}, [2]int{9, 9})},
		{"wave reaches the bottom", cells([2]int{9, 0}), plane{}, plane{}, true, -1, Noop, 0, true, cells()},
		{"wave waits", cells([2]int{2, 3}), plane{}, plane{}, false, -1, Noop, 0, false, cells([2]int{2, 3})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := exact(t, "space_invaders")
			g := e.game.(*invaders)
			g.aliens, g.shots, g.bombs, g.dir = tc.aliens, tc.shots, tc.bombs, tc.dir
			g.marchDue = 5
			if tc.march {
				g.marchDue = 0
			}
			r, term := step(t, e, tc.action)
			if r != tc.reward || term != tc.terminal {
				t.Errorf("reward %d terminal %v, want %d %v\n%s", r, term, tc.reward, tc.terminal, e.Render())
			}
			if tc.name == "wave reaches the bottom" {
				return // the wave that fell off the grid is replaced
			}
			if g.aliens != tc.after {
				t.Errorf("aliens after the step:\n%s", e.Render())
			}
		})
	}
}

func TestInvadersWaves(t *testing.T) {
	for _, ramping := range []bool{true, false} {
		o := DefaultOptions()
		o.Sticky, o.Ramping = 0, ramping
		e := newEnv(t, "space_invaders", o)
		g := e.game.(*invaders)
		if g.aliens.count() != 24 || !g.aliens[0][2] || !g.aliens[3][7] || g.aliens[4][2] || g.aliens[0][1] {
			t.Fatalf("first wave:\n%s", e.Render())
		}
		for wave := 1; wave <= 8; wave++ {
			// Shoot the last alien of the wave.
			g.aliens, g.shots, g.bombs = cells([2]int{3, 5}), cells([2]int{4, 5}), plane{}
			r, term := step(t, e, Noop)
			want := invaderMove
			if ramping {
				want = max(invaderMinMove, invaderMove-wave)
			}
			if r != 1 || term || g.aliens.count() != 24 || g.period != want {
				t.Fatalf("ramping %v, wave %d cleared: reward %d terminal %v, %d aliens, period %d (want %d)",
					ramping, wave, r, term, g.aliens.count(), g.period, want)
			}
		}
	}
}

// TestInvadersMarchSpeed checks that the wave marches every period steps,
// and every n steps when only n < period aliens are left.
func TestInvadersMarchSpeed(t *testing.T) {
	for _, n := range []int{24, 12, 3, 1} {
		e := exact(t, "space_invaders")
		g := e.game.(*invaders)
		g.aliens = plane{}
		for i := range n {
			g.aliens[i/6][2+i%6] = true
		}
		g.marchDue = 0
		marches := 0
		steps := 3 * min(n, invaderMove)
		for range steps {
			g.bombDue = 100 // no shots
			before := g.aliens
			step(t, e, Noop)
			if g.aliens != before {
				marches++
			}
		}
		if marches != 3 {
			t.Errorf("%d aliens: %d marches in %d steps, want 3", n, marches, steps)
		}
	}
}

func TestInvadersAlienShots(t *testing.T) {
	tests := []struct {
		name   string
		aliens plane
		cannon int
		bomb   [2]int // where the bullet is after the step (it moves a row the next)
	}{
		{"above the cannon", cells([2]int{1, 5}, [2]int{3, 5}, [2]int{3, 4}), 5, [2]int{3, 5}},
		{"nearest column", cells([2]int{2, 2}, [2]int{0, 8}), 6, [2]int{0, 8}},
		{"tie goes left", cells([2]int{2, 3}, [2]int{1, 7}), 5, [2]int{2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := exact(t, "space_invaders")
			g := e.game.(*invaders)
			g.aliens, g.cannon, g.bombDue, g.marchDue = tc.aliens, tc.cannon, 0, 5
			step(t, e, Noop)
			if g.bombs != cells(tc.bomb) || g.bombDue != invaderShotPeriod-1 {
				t.Errorf("bombs:\n%s", e.Render())
			}
		})
	}
}

func TestInvadersCannon(t *testing.T) {
	e := exact(t, "space_invaders")
	g := e.game.(*invaders)
	g.marchDue, g.bombDue = 100, 100
	g.aliens = cells([2]int{0, 0}) // out of the line of fire
	step(t, e, Fire)
	if g.shots != cells([2]int{8, 5}) {
		t.Fatalf("a shot fired from column 5 is not in row 8:\n%s", e.Render())
	}
	for range 4 {
		step(t, e, Fire) // cooling down
	}
	if g.shots.count() != 1 {
		t.Fatalf("%d shots during the cooldown", g.shots.count())
	}
	step(t, e, Fire)
	if g.shots.count() != 2 {
		t.Fatalf("%d shots after the cooldown", g.shots.count())
	}
	for range 12 {
		step(t, e, Right)
	}
	if g.cannon != Size-1 {
		t.Errorf("cannon at %d", g.cannon)
	}
	if !cell(e, Size-1, Size-1, siCannon) || !cell(e, 0, 0, siAlienLeft) || cell(e, 0, 0, siAlienRight) {
		t.Errorf("observation:\n%s", e.Render())
	}
}
