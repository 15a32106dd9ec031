package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// Hosted workers share one address; each request names its worker, and
// each answers as itself. A request that names no worker, or one the
// process does not host, is refused; one that exits leaves the others
// serving, and the last one's exit removes the loop record.
func TestHostedWorkersShareOneAddress(t *testing.T) {
	repo := workertest.Repo(t)
	cancel, names, done := startMany(t, repo, echoworker.TypeName, 8, time.Hour)
	ctx := ctxT(t)
	panel := workertest.Panel(t, repo, testTrial)
	if err := panel.Connect(ctx, names...); err != nil {
		t.Fatal(err)
	}
	addr, err := repo.Get(ctx, testTrial.Worker(names[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if a, err := repo.Get(ctx, testTrial.Worker(n)); err != nil || a != addr {
			t.Fatalf("%s registered at %q, %v; want the host's %s", n, a, err, addr)
		}
	}
	for i, r := range panel.GroupRequest(ctx, names, member.CmdStatus, nil) {
		var st member.Status
		if err := r.Decode(&st); err != nil || st.Name != names[i] || st.Loop != names[0] {
			t.Fatalf("%s answered %+v, %v", names[i], st, err)
		}
	}
	c, err := rpc.Dial(addr, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, target := range []string{"", "echo/99"} {
		if err := c.RequestTo(ctx, target, member.CmdPing, nil, nil); !errors.Is(err, rpc.ErrUnknownWorker) {
			t.Errorf("ping naming %q: %v, want unknown_worker", target, err)
		}
	}
	if err := panel.Request(ctx, names[3], member.CmdExit, nil, nil); err != nil {
		t.Fatal(err)
	}
	workertest.WaitState(t, panel, names[3], member.StateCompleted)
	if err := c.RequestTo(ctx, names[3], member.CmdPing, nil, nil); !errors.Is(err, rpc.ErrUnknownWorker) {
		t.Errorf("ping to the exited %s: %v, want unknown_worker", names[3], err)
	}
	if err := c.RequestTo(ctx, names[4], member.CmdPing, nil, nil); err != nil {
		t.Errorf("ping to %s after %s exited: %v", names[4], names[3], err)
	}
	// The status writer puts the record asynchronously, after the
	// workers answer; on a loaded machine that can come after the above.
	eventually.NoError(t, 10*time.Second, "loop record while workers run", func() error {
		_, err := repo.Get(ctx, testTrial.Loop(names[0]))
		return err
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, err := repo.Get(ctx, testTrial.Loop(names[0])); !errors.Is(err, nameresolve.ErrNotFound) {
		t.Errorf("loop record after the last worker exited: %q, %v", v, err)
	}
}

// The workers of one process share its loop: one stuck in a poll stops
// them all, and the panel reports every one of them HUNG, then RUNNING
// once the loop turns again.
func TestHostedStuckLoopIsHung(t *testing.T) {
	repo := workertest.Repo(t)
	_, names, _ := startHosted(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: "scripted", Host: "127.0.0.1", Repo: repo,
		IdleWait: 10 * time.Millisecond, Heartbeat: 20 * time.Millisecond, Logger: workertest.Logger(t, slog.LevelInfo),
	}, 3)
	const bound = 300 * time.Millisecond
	panel := panel.New(repo, testTrial, panel.Options{HungAfter: bound})
	t.Cleanup(func() { panel.Close() })
	release := make(chan struct{})
	hangs.Store("hosted", release)
	t.Cleanup(func() { hangs.Delete("hosted") })
	polling := pollSignal(t, "hosted")
	ctx := ctxT(t)
	for i, name := range names {
		kw := map[string]any{}
		if i == 1 {
			kw = map[string]any{"hang": "hosted", "signal": "hosted"}
		}
		if err := panel.Request(ctx, name, member.CmdConfigure, kw, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The hanging worker starts last: once its poll hangs, the shared loop
	// serves no other worker's start.
	for _, name := range []string{names[0], names[2], names[1]} {
		if err := panel.Request(ctx, name, member.CmdStart, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	workertest.Received(t, polling, "the poll hangs")
	for _, name := range names {
		st := workertest.WaitState(t, panel, name, member.StateHung)
		if !strings.Contains(st.Error, "the loop has not turned for") {
			t.Errorf("%s: %+v", name, st)
		}
	}
	close(release)
	for _, name := range names {
		workertest.WaitState(t, panel, name, member.StateRunning)
	}
}

// countingRepo counts the writes below each prefix of interest.
type countingRepo struct {
	nameresolve.Repository
	mu     sync.Mutex
	writes map[string]int
}

func (r *countingRepo) Add(ctx context.Context, key, value string, opts nameresolve.AddOptions) error {
	r.mu.Lock()
	for _, p := range []string{testTrial.StatusPrefix(), testTrial.LoopPrefix()} {
		if strings.HasPrefix(key, p) {
			r.writes[p]++
		}
	}
	r.mu.Unlock()
	return r.Repository.Add(ctx, key, value, opts)
}

func (r *countingRepo) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes[prefix]
}

// A process's heartbeat is one loop record, whatever the number of workers
// it hosts: while 64 workers run and nothing changes their state, none of
// their status records is written, and the loop record at most once per
// heartbeat.
func TestHostedHeartbeatIsOneRecord(t *testing.T) {
	repo := &countingRepo{Repository: workertest.Repo(t), writes: map[string]int{}}
	const heartbeat = 20 * time.Millisecond
	_, names, _ := startHosted(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: echoworker.TypeName, Host: "127.0.0.1", Repo: repo,
		IdleWait: 5 * time.Millisecond, Heartbeat: heartbeat, Logger: workertest.Logger(t, slog.LevelWarn),
	}, 64)
	panel := workertest.Panel(t, repo, testTrial)
	ctx := ctxT(t)
	for _, cmd := range []string{member.CmdConfigure, member.CmdStart} {
		for _, r := range panel.GroupRequest(ctx, names, cmd, nil) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	for _, name := range names {
		workertest.WaitState(t, panel, name, member.StateRunning)
	}
	status, loop := repo.count(testTrial.StatusPrefix()), repo.count(testTrial.LoopPrefix())
	begin := time.Now()
	time.Sleep(25 * heartbeat) // the loop turns; nothing else happens
	elapsed := time.Since(begin)
	status, loop = repo.count(testTrial.StatusPrefix())-status, repo.count(testTrial.LoopPrefix())-loop
	t.Logf("in %v: %d status writes, %d loop record writes", elapsed, status, loop)
	if status != 0 {
		t.Errorf("%d status records written while no state changed", status)
	}
	if loop < 1 || loop > int(elapsed/heartbeat)+2 {
		t.Errorf("%d loop record writes in %v at one per %v", loop, elapsed, heartbeat)
	}
}
