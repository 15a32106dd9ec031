// Package grouptest is test support for collective groups: their members
// in one test process, each joined and formed, on goroutines of their own
// or, for benchmarks, formed from the caller's and handed over.
package grouptest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/collective"
)

// Form polls g until its group is formed, Poll fails or ctx ends.
func Form(ctx context.Context, g *collective.Group) error {
	for {
		ok, err := g.Poll()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rank %d: not formed (missing %v): %w", g.Rank(), g.Missing(), ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Run joins size members with the options o (each its own Rank, and
// Size), each on its own goroutine (a Group belongs to one), forms the
// group, runs fn on every member, closes it, and returns each rank's
// error.
func Run(ctx context.Context, o collective.Options, size int, fn func(ctx context.Context, g *collective.Group) error) []error {
	errs := make([]error, size)
	var wg sync.WaitGroup
	for rank := range size {
		wg.Go(func() {
			m := o
			m.Rank, m.Size = rank, size
			g, err := collective.Join(ctx, m)
			if err != nil {
				errs[rank] = err
				return
			}
			defer g.Close()
			if err := Form(ctx, g); err != nil {
				errs[rank] = err
				return
			}
			errs[rank] = fn(ctx, g)
		})
	}
	wg.Wait()
	return errs
}

// JoinFormed joins size members with the options o from the caller's
// goroutine and polls them all until the group is formed: a benchmark then
// hands each member to a goroutine of its own (none is used concurrently).
// close closes them all.
func JoinFormed(ctx context.Context, o collective.Options, size int) (groups []*collective.Group, close func(), err error) {
	close = func() {
		for _, g := range groups {
			g.Close()
		}
	}
	for rank := range size {
		m := o
		m.Rank, m.Size = rank, size
		g, err := collective.Join(ctx, m)
		if err != nil {
			close()
			return nil, nil, err
		}
		groups = append(groups, g)
	}
	for formed := 0; formed < size; time.Sleep(time.Millisecond) {
		formed = 0
		for _, g := range groups {
			ok, err := g.Poll()
			if err != nil {
				close()
				return nil, nil, err
			}
			if ok {
				formed++
			}
		}
		if ctx.Err() != nil {
			close()
			return nil, nil, fmt.Errorf("the group did not form: %w", ctx.Err())
		}
	}
	return groups, close, nil
}

// NoErrors fails tb at the first rank's error.
func NoErrors(tb testing.TB, errs []error) {
	tb.Helper()
	for r, err := range errs {
		if err != nil {
			tb.Fatalf("rank %d: %v", r, err)
		}
	}
}

// SameBits fails tb unless every rank's vector is rank 0's, bit for bit:
// what the members of a data-parallel group must hold.
func SameBits(tb testing.TB, vectors [][]float32) {
	tb.Helper()
	for r := 1; r < len(vectors); r++ {
		if len(vectors[r]) != len(vectors[0]) {
			tb.Fatalf("rank %d holds %d values, rank 0 %d", r, len(vectors[r]), len(vectors[0]))
		}
		for i, v := range vectors[r] {
			if math.Float32bits(v) != math.Float32bits(vectors[0][i]) {
				tb.Fatalf("rank %d's value %d is %v, rank 0's %v", r, i, v, vectors[0][i])
			}
		}
	}
}

// Loop runs op b.N times on every rank of size at once, each on its own
// goroutine, and fails b on the first error; the timer covers the loops
// alone.
func Loop(b *testing.B, size int, op func(rank int) error) {
	b.ResetTimer()
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Go(func() {
			for range b.N {
				if errs[r] = op(r); errs[r] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	NoErrors(b, errs)
}
