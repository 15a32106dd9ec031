package collective_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/internal/testsupport/curvetest"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/grouptest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
)

var trial = names.NewTrial("collectivetest", "t1")

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

func opts(repo nameresolve.Repository, name string, rank, size int) collective.Options {
	return collective.Options{Repo: repo, Trial: trial, Name: name, Rank: rank, Size: size, Hash: "h", TTL: 2 * time.Second}
}

// members runs fn on every rank of a group of size with the options o,
// each on its own goroutine, after forming the group; it returns the
// ranks' errors.
func members(t *testing.T, o collective.Options, size int, fn func(ctx context.Context, g *collective.Group) error) []error {
	t.Helper()
	return grouptest.Run(workertest.Ctx(t, 30*time.Second), o, size, fn)
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// transports runs f over each of a member's links: shared memory (members
// on one node) and ZeroMQ (DISTRL_SHM=0, as between nodes).
func transports(t *testing.T, f func(t *testing.T, transport string)) {
	for _, transport := range []string{"shm", "zmq"} {
		t.Run(transport, func(t *testing.T) {
			if transport == "zmq" {
				t.Setenv("DISTRL_SHM", "0")
			}
			f(t, transport)
		})
	}
}

// The sums are right, on every member bit for bit, for vectors shorter
// than the group, of 3 million values (fragmented: a chunk is more than a
// message carries), and several in a row.
func TestAllreduce(t *testing.T) {
	repo := workertest.Repo(t)
	transports(t, func(t *testing.T, transport string) { testAllreduce(t, repo, transport) })
}

func testAllreduce(t *testing.T, repo nameresolve.Repository, transport string) {
	for _, size := range []int{1, 2, 3, 4} {
		for _, n := range []int{0, 1, 3, 1000, 140_003, 3_000_001} {
			if n > 1_000_000 && size != 2 {
				continue
			}
			t.Run(fmt.Sprintf("size=%d/len=%d", size, n), func(t *testing.T) {
				name := fmt.Sprintf("ar%d-%d-%s", size, n, transport)
				got := make([][]float32, size)
				got64 := make([][]float64, size)
				errs := members(t, opts(repo, name, 0, size), size,
					func(ctx context.Context, g *collective.Group) error {
						x := make([]float32, n)
						y := make([]float64, n)
						for i := range x {
							x[i] = float32(g.Rank()+1) * float32(i%97) * 0.25
							y[i] = float64(g.Rank()+1) * float64(i)
						}
						for range 3 { // several in a row reuse the formation
							if err := g.AllreduceFloat32(ctx, x); err != nil {
								return err
							}
						}
						if err := g.AllreduceFloat64(ctx, y); err != nil {
							return err
						}
						got[g.Rank()], got64[g.Rank()] = x, y
						return nil
					})
				noErrors(t, errs)
				if t.Failed() {
					return
				}
				// The sum of ranks 1..size is s; three all-reduces in a row
				// multiply by s, s*size, s*size.
				s := float64(size * (size + 1) / 2)
				for r := range size {
					for i := range n {
						want := s * float64(size*size) * float64(i%97) * 0.25
						if math.Abs(float64(got[r][i])-want) > 1e-6*math.Max(1, want) {
							t.Fatalf("rank %d: x[%d] = %v, want %v", r, i, got[r][i], want)
						}
						if math.Float32bits(got[r][i]) != math.Float32bits(got[0][i]) {
							t.Fatalf("rank %d: x[%d] = %v, rank 0 has %v: not the same bits", r, i, got[r][i], got[0][i])
						}
						if want64 := s * float64(i); got64[r][i] != want64 {
							t.Fatalf("rank %d: y[%d] = %v, want %v", r, i, got64[r][i], want64)
						}
					}
				}
			})
		}
	}
}

func TestBroadcastAndCheck(t *testing.T) {
	repo := workertest.Repo(t)
	transports(t, func(t *testing.T, transport string) { testBroadcastAndCheck(t, repo, transport) })
}

func testBroadcastAndCheck(t *testing.T, repo nameresolve.Repository, transport string) {
	const size = 3
	big := make([]byte, 5<<20+7) // several fragments
	for i := range big {
		big[i] = byte(i * 7)
	}
	errs := members(t, opts(repo, "bc-"+transport, 0, size), size,
		func(ctx context.Context, g *collective.Group) error {
			mine := []byte(fmt.Sprintf("from rank %d", g.Rank()))
			got, err := g.Broadcast(ctx, mine)
			if err != nil {
				return err
			}
			if string(got) != "from rank 0" {
				return fmt.Errorf("broadcast gave %q", got)
			}
			var payload []byte
			if g.Rank() == 0 {
				payload = big
			}
			if got, err = g.Broadcast(ctx, payload); err != nil {
				return err
			}
			if !bytes.Equal(got, big) {
				return fmt.Errorf("a broadcast of %d bytes gave %d bytes, equal %v", len(big), len(got), bytes.Equal(got, big))
			}
			if err := g.Check(ctx, 0xdeadbeefcafe); err != nil {
				return fmt.Errorf("equal hashes: %w", err)
			}
			h := uint64(0xdeadbeefcafe)
			if g.Rank() == 2 {
				h++
			}
			err = g.Check(ctx, h)
			if !errors.Is(err, collective.ErrDiverged) {
				return fmt.Errorf("rank 2's hash differs, Check says %v", err)
			}
			// The group stays formed: the caller decides what divergence means.
			return g.AllreduceFloat32(ctx, make([]float32, 10))
		})
	noErrors(t, errs)
}

// Arrive returns true on no member before all have arrived, and then on
// all; the collectives after it run as usual.
func TestArrive(t *testing.T) {
	repo := workertest.Repo(t)
	const size = 3
	var mu sync.Mutex
	count := 0
	errs := members(t, opts(repo, "arrive", 0, size), size,
		func(ctx context.Context, g *collective.Group) error {
			for round := range 3 {
				// Rank r is ready after r*30 ms: the others wait for it.
				time.Sleep(time.Duration(g.Rank()*30) * time.Millisecond)
				mu.Lock()
				count++
				mu.Unlock()
				for {
					done, err := g.Arrive()
					if err != nil {
						return err
					}
					if done {
						break
					}
					if ctx.Err() != nil {
						return ctx.Err()
					}
					time.Sleep(time.Millisecond)
				}
				mu.Lock()
				n := count
				mu.Unlock()
				if n < size*(round+1) {
					return fmt.Errorf("round %d: released when %d of %d had arrived", round, n-size*round, size)
				}
				x := []float32{1}
				if err := g.AllreduceFloat32(ctx, x); err != nil {
					return err
				}
				if x[0] != size {
					return fmt.Errorf("sum %v after the barrier", x[0])
				}
			}
			return nil
		})
	noErrors(t, errs)
}

func TestCurve(t *testing.T) {
	repo := workertest.Repo(t)
	keys := curvetest.Keys(t)
	o := opts(repo, "curve", 0, 2)
	o.Curve = keys
	errs := members(t, o, 2, func(ctx context.Context, g *collective.Group) error {
		x := []float32{1, 2, 3}
		if err := g.AllreduceFloat32(ctx, x); err != nil {
			return err
		}
		if x[2] != 6 {
			return fmt.Errorf("sum %v", x)
		}
		return nil
	})
	noErrors(t, errs)
}

func TestRefusedConfig(t *testing.T) {
	repo := workertest.Repo(t)
	ctx := workertest.Ctx(t, 10*time.Second)
	lead, err := collective.Join(ctx, opts(repo, "refuse", 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	o := opts(repo, "refuse", 1, 2)
	o.Hash = "other"
	g, err := collective.Join(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for {
		lead.Poll()
		ok, err := g.Poll()
		if errors.Is(err, collective.ErrRefused) {
			t.Logf("refused: %v", err)
			return
		}
		if ok || err != nil || ctx.Err() != nil {
			t.Fatalf("a member of another hash: formed %v, err %v (ctx %v)", ok, err, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSilentPeerTimesOut(t *testing.T) {
	repo := workertest.Repo(t)
	const size = 3
	o := opts(repo, "silent", 0, size)
	o.Timeout = 300 * time.Millisecond
	errs := members(t, o, size, func(ctx context.Context, g *collective.Group) error {
		if g.Rank() == 2 {
			return nil // takes no part: the others must not wait for ever
		}
		start := time.Now()
		err := g.AllreduceFloat32(ctx, make([]float32, 100))
		if !errors.Is(err, collective.ErrBroken) {
			return fmt.Errorf("a silent member: the all-reduce gave %v, want ErrBroken", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			return fmt.Errorf("noticed after %v", d)
		}
		if g.Formed() {
			return errors.New("still formed after a break")
		}
		return nil
	})
	noErrors(t, errs)
}

// TestMemberRestarts kills a member's registration (its process dies: the
// record expires with its lease on a real etcd) while the others wait in
// an all-reduce; they notice, and once a new incarnation of the member
// joins, the group forms again and reduces.
func TestMemberRestarts(t *testing.T) {
	repo := etcdtest.Repo(t)
	const size = 3
	ctx := workertest.Ctx(t, 60*time.Second)
	log := workertest.Logger(t, slog.LevelInfo)
	o := func(r int) collective.Options {
		x := opts(repo, "restart", r, size)
		x.Logger = log
		return x
	}
	var wg sync.WaitGroup
	errs := make([]error, size)
	gone := make(chan struct{})
	for rank := range size - 1 {
		wg.Go(func() {
			errs[rank] = func() error {
				g, err := collective.Join(ctx, o(rank))
				if err != nil {
					return err
				}
				defer g.Close()
				if err := grouptest.Form(ctx, g); err != nil {
					return err
				}
				<-gone
				start := time.Now()
				err = g.AllreduceFloat32(ctx, make([]float32, 10))
				if !errors.Is(err, collective.ErrBroken) {
					return fmt.Errorf("the all-reduce after a member left gave %v", err)
				}
				t.Logf("rank %d noticed in %v: %v", rank, time.Since(start), err)
				if err := grouptest.Form(ctx, g); err != nil {
					return err
				}
				x := []float32{1}
				if err := g.AllreduceFloat32(ctx, x); err != nil {
					return err
				}
				if x[0] != size {
					return fmt.Errorf("sum %v after re-forming", x[0])
				}
				if g.Reforms() == 0 {
					return errors.New("no re-formation counted")
				}
				return nil
			}()
		})
	}
	// The last member joins, forms, and goes away without a word.
	last, err := collective.Join(ctx, o(size-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := grouptest.Form(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := last.Close(); err != nil {
		t.Fatal(err)
	}
	close(gone)
	time.Sleep(200 * time.Millisecond)
	again, err := collective.Join(ctx, o(size-1))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := grouptest.Form(ctx, again); err != nil {
		t.Fatal(err)
	}
	x := []float32{1}
	if err := again.AllreduceFloat32(ctx, x); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	noErrors(t, errs)
}

// A member's record deleted under it (by an older process of its rank
// closing late, or with a lease) is written again; a member whose rank
// another process registered since steps down with ErrRefused.
func TestOwnRecord(t *testing.T) {
	repo := workertest.Repo(t)
	ctx := workertest.Ctx(t, 20*time.Second)
	a, err := collective.Join(ctx, opts(repo, "own", 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	key := trial.Group("own", 0)
	if err := repo.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := a.Poll(); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.Get(ctx, key); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the deleted record was not written again")
		}
		time.Sleep(time.Millisecond)
	}
	b, err := collective.Join(ctx, opts(repo, "own", 0, 2)) // a second process of rank 0
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for {
		_, err := a.Poll()
		if errors.Is(err, collective.ErrRefused) {
			t.Logf("the older member: %v", err)
			break
		}
		if err != nil || ctx.Err() != nil {
			t.Fatalf("the older member of a rank taken again: %v (%v)", err, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Poll(); err != nil {
		t.Fatalf("the newer member: %v", err)
	}
}

// A right neighbour whose shared memory is gone while its record is still
// in the view (its process exited; the record goes with its lease, or as
// here when it closes) does not break the member that dials it: formation
// waits, and forms with the neighbour's next incarnation.
func TestNeighbourGoneBeforeDial(t *testing.T) {
	repo := workertest.Repo(t)
	ctx := workertest.Ctx(t, 20*time.Second)
	lead, err := collective.Join(ctx, opts(repo, "gone", 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	away, err := collective.Join(ctx, opts(repo, "gone", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	val, err := repo.Get(ctx, trial.Group("gone", 1))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Addr string }
	if err := json.Unmarshal([]byte(val), &rec); err != nil {
		t.Fatal(err)
	}
	dir := zsock.SharedMemory(rec.Addr)
	if dir == "" {
		t.Skip("no shared memory here")
	}
	if err := os.RemoveAll(dir); err != nil { // as if its process had gone
		t.Fatal(err)
	}
	for range 20 {
		if ok, err := lead.Poll(); ok || err != nil {
			t.Fatalf("rank 0 with its neighbour's shared memory gone: formed %v, err %v", ok, err)
		}
		time.Sleep(time.Millisecond)
	}
	away.Close()
	back, err := collective.Join(ctx, opts(repo, "gone", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	for {
		okLead, err := lead.Poll()
		if err != nil {
			t.Fatalf("rank 0: %v", err)
		}
		okBack, err := back.Poll()
		if err != nil {
			t.Fatalf("rank 1: %v", err)
		}
		if okLead && okBack {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("the group did not form with the neighbour's next incarnation")
		}
		time.Sleep(time.Millisecond)
	}
}
