package minatar

import "testing"

func TestBreakoutReset(t *testing.T) {
	sides := map[int]int{}
	for seed := range int64(64) {
		e := exact(t, "breakout")
		e.Reset(seed)
		g := e.game.(*breakout)
		if g.y != 3 || ballStartRow != 3 || g.dy != 1 || g.paddle != paddleStart || g.bricks.count() != 30 {
			t.Fatalf("seed %d: %+v", seed, g)
		}
		// The ball starts at a side, heading inwards.
		if !(g.x == 0 && g.dx == 1 || g.x == Size-1 && g.dx == -1) {
			t.Fatalf("seed %d: ball at column %d heading %d", seed, g.x, g.dx)
		}
		sides[g.x]++
	}
	if sides[0] < 16 || sides[Size-1] < 16 {
		t.Errorf("ball sides over 64 seeds: %v", sides)
	}
}

func TestBreakoutRules(t *testing.T) {
	type ball struct{ x, y, dx, dy int }
	tests := []struct {
		name     string
		start    ball
		paddle   int
		action   int32
		clear    bool // no bricks before the step
		want     ball
		paddleTo int
		reward   int
		terminal bool
		bricks   int // after the step
	}{
		{"free flight", ball{5, 5, 1, 1}, 4, Noop, false, ball{6, 6, 1, 1}, 4, 0, false, 30},
		{"right wall", ball{9, 5, 1, 1}, 4, Noop, false, ball{9, 6, -1, 1}, 4, 0, false, 30},
		{"left wall", ball{0, 6, -1, -1}, 4, Noop, false, ball{0, 5, 1, -1}, 4, 0, false, 30},
		{"top wall", ball{4, 0, 1, -1}, 4, Noop, true, ball{5, 0, 1, 1}, 4, 0, false, 0},
		{"corner", ball{0, 0, -1, -1}, 4, Noop, true, ball{0, 0, 1, 1}, 4, 0, false, 0},
		{"brick", ball{3, 4, 1, -1}, 4, Noop, false, ball{4, 4, 1, 1}, 4, 1, false, 29},
		{"paddle under the ball", ball{3, 8, 1, 1}, 3, Noop, false, ball{4, 8, 1, -1}, 3, 0, false, 30},
		{"paddle moved under the ball", ball{3, 8, 1, 1}, 2, Right, false, ball{4, 8, 1, -1}, 3, 0, false, 30},
		{"paddle edge", ball{3, 8, 1, 1}, 4, Noop, false, ball{4, 8, -1, -1}, 4, 0, false, 30},
		{"ball lost", ball{3, 8, 1, 1}, 7, Noop, false, ball{4, 9, 1, 1}, 7, 0, true, 30},
		{"paddle at the left edge", ball{5, 5, 1, 1}, 0, Left, false, ball{6, 6, 1, 1}, 0, 0, false, 30},
		{"paddle at the right edge", ball{5, 5, 1, 1}, 9, Right, false, ball{6, 6, 1, 1}, 9, 0, false, 30},
		{"wall rebuilt when the ball comes down", ball{3, 8, 1, 1}, 3, Noop, true, ball{4, 8, 1, -1}, 3, 0, false, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := exact(t, "breakout")
			g := e.game.(*breakout)
			g.x, g.y, g.dx, g.dy = tc.start.x, tc.start.y, tc.start.dx, tc.start.dy
			g.paddle = tc.paddle
			if tc.clear {
				g.bricks = plane{}
			}
			r, term := step(t, e, tc.action)
			got := ball{g.x, g.y, g.dx, g.dy}
			if got != tc.want || g.paddle != tc.paddleTo || r != tc.reward || term != tc.terminal || g.bricks.count() != tc.bricks {
				t.Errorf("ball %+v paddle %d reward %d terminal %v bricks %d, want %+v %d %d %v %d\n%s",
					got, g.paddle, r, term, g.bricks.count(), tc.want, tc.paddleTo, tc.reward, tc.terminal, tc.bricks, e.Render())
			}
			// The observation shows the ball, its trail where it was and
			// the paddle.
			if !cell(e, g.y, g.x, boBall) || !cell(e, tc.start.y, tc.start.x, boTrail) || !cell(e, Size-1, g.paddle, boPaddle) {
				t.Errorf("observation:\n%s", e.Render())
			}
		})
	}
}

// TestBreakoutRally plays a whole episode with a paddle that follows the
// ball: it breaks bricks, clears the wall and gets a new one.
func TestBreakoutRally(t *testing.T) {
	e := exact(t, "breakout")
	g := e.game.(*breakout)
	total, rebuilt := 0, false
	for range 5000 {
		a := Noop
		// Aim under where the ball will be on row 8, reflecting its path
		// off the side walls (where it spends two steps in the edge
		// column), or under the ball while it rises.
		target := g.x
		if g.dy > 0 {
			p := ((g.x+g.dx*(Size-2-g.y))%20 + 20) % 20
			if p >= Size {
				p = 2*Size - 1 - p
			}
			target = p
		}
		switch {
		case g.paddle < target:
			a = Right
		case g.paddle > target:
			a = Left
		}
		before := g.bricks.count()
		r, term := step(t, e, a)
		total += r
		if before == 0 && g.bricks.count() == 30 {
			rebuilt = true
		}
		if term {
			break
		}
	}
	if total < 30 || !rebuilt {
		t.Errorf("a tracking paddle scored %d (wall rebuilt: %v)", total, rebuilt)
	}
}

// TestBreakoutFirstDescent: the ball starts on row 3 (MinAtar's), so a
// paddle that stays at column 4 catches it when it comes from the right
// and misses it when it comes from the left, at the first descent.
func TestBreakoutFirstDescent(t *testing.T) {
	for _, fromLeft := range []bool{true, false} {
		e := exact(t, "breakout")
		g := e.game.(*breakout)
		if fromLeft {
			g.x, g.dx = 0, 1
		} else {
			g.x, g.dx = Size-1, -1
		}
		g.lastX = g.x
		var term bool
		for range 6 {
			_, term = step(t, e, Noop)
		}
		if term != fromLeft {
			t.Errorf("ball from the left %v: lost at the first descent %v, want %v\n%s", fromLeft, term, fromLeft, e.Render())
		}
	}
}

// TestBreakoutStrike: MinAtar breaks no brick on the step after one broke;
// the ball passes into that brick keeping its direction, and only a step
// without a brick contact makes the next contact count again.
func TestBreakoutStrike(t *testing.T) {
	e := exact(t, "breakout")
	g := e.game.(*breakout)
	g.bricks[2][3] = false // a gap in the wall, with the ball in it heading down-right
	g.x, g.y, g.dx, g.dy = 3, 2, 1, 1
	type ball struct{ x, y, dx, dy int }
	for i, want := range []struct {
		ball   ball
		reward int
		bricks int
	}{
		{ball{4, 2, 1, -1}, 1, 28}, // breaks (4,3), bounces, lands in the brick at (4,2)
		{ball{5, 1, 1, -1}, 0, 28}, // meets (5,1) right after a strike: passes into it
		{ball{6, 0, 1, -1}, 0, 28}, // row 0 is clear: the strike is over
		{ball{7, 0, 1, 1}, 0, 28},  // the top wall
		{ball{8, 0, 1, -1}, 1, 27}, // (8,1) breaks again
	} {
		r, term := step(t, e, Noop)
		if got := (ball{g.x, g.y, g.dx, g.dy}); got != want.ball || r != want.reward || term || g.bricks.count() != want.bricks {
			t.Fatalf("step %d: ball %+v reward %d bricks %d, want %+v %d %d\n%s", i+1, got, r, g.bricks.count(), want.ball, want.reward, want.bricks, e.Render())
		}
	}
}
