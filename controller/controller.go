package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// process is one worker process of the trial, hosting one worker or many
// (per_process): the unit the controller starts, watches and restarts.
// Only the controller's loop goroutine touches processes and members.
type process struct {
	spec    WorkerSpec
	handle  Handle
	members []*trialWorker // by index
	// restarts counts this process's restarts against max_restarts: a
	// restart of a host is one, however many of its workers failed.
	restarts   int
	restarting bool
	// finished: it exited after all its workers completed; it is not restarted.
	finished bool
}

// trialWorker is one worker of the trial as the controller sees it.
type trialWorker struct {
	name      string
	group     string
	typ       string
	index     int
	proc      *process
	lastState member.State
	lastStats map[string]any
	base      counters
}

type exitEvent struct {
	proc   *process
	handle Handle
	err    error
}

type restartResult struct {
	proc   *process
	handle Handle // nil if no process was started
	err    error
}

type stopRequest struct {
	outcome Outcome
	reason  string
}

// Controller runs one trial; see Run.
type Controller struct {
	opts  Options
	cfg   *experiment.Config
	dir   TrialDir
	log   *slog.Logger
	out   *progress
	trial names.Trial

	record    Record
	repo      *etcd.Repository
	etcd      *etcdserver.Server // nil when an external etcd is used
	etcdQuiet atomic.Bool        // silences the embedded etcd's log while it closes
	// owner: this controller cleared the trial's records and registered as
	// its ctl, so the records are its to clear at the end. A controller
	// that found the trial alive must leave them to the one running it.
	owner    bool
	endpoint string
	panel    *panel.ControlPanel
	ctl      *rpc.Server
	metrics  *os.File

	procs   []*process     // in start order
	members []*trialWorker // in start order
	byName  map[string]*trialWorker

	exited    chan exitEvent
	restarted chan restartResult
	stopReq   chan stopRequest
	quit      chan struct{} // closed when shutdown begins
	restartWG sync.WaitGroup

	began, running time.Time
	restarts       int

	lastMu sync.Mutex
	last   *Metrics // read by the ctl server's goroutine
}

// Run runs the trial of opts to its end and returns how it ended. The
// error is non-nil exactly when the outcome is Failed.
func Run(ctx context.Context, opts Options) (Result, error) {
	opts.setDefaults()
	if opts.Config == nil || opts.Scheduler == nil || opts.Dir == "" || opts.Trial == "" {
		err := errors.New("controller: Options.Config, Scheduler, Dir and Trial are required")
		return Result{Outcome: Failed, Reason: err.Error(), Dir: opts.Dir}, err
	}
	// count: auto means this machine's cores (the config's snapshot, in
	// the trial directory, records the numbers).
	opts.Config.ResolveCounts(runtime.NumCPU())
	if err := checkBounds(opts.Config); err != nil {
		return Result{Outcome: Failed, Reason: err.Error(), Dir: opts.Dir}, err
	}
	c := &Controller{
		opts: opts, cfg: opts.Config, dir: opts.Dir, log: opts.Logger,
		out:   &progress{out: opts.Out, tty: opts.TTY},
		trial: names.NewTrial(opts.Config.Name, opts.Trial),
		began: time.Now(), stopReq: make(chan stopRequest, 1), quit: make(chan struct{}),
		byName: map[string]*trialWorker{},
	}
	return c.run(ctx)
}

func (c *Controller) run(ctx context.Context) (Result, error) {
	if err := c.claimDir(); err != nil {
		// The record may be another controller's: leave it alone.
		return Result{Outcome: Failed, Reason: err.Error(), Dir: c.dir}, err
	}
	outcome, reason, err := c.setUpAndRun(ctx)
	res := c.shutdown(outcome, reason)
	if outcome == Failed && err == nil {
		err = errors.New(reason)
	}
	return res, err
}

// setUpAndRun does everything between claiming the directory and the
// shutdown, which follows whatever it returns.
func (c *Controller) setUpAndRun(ctx context.Context) (Outcome, string, error) {
	fail := func(err error) (Outcome, string, error) {
		if ctx.Err() != nil {
			return Interrupted, "interrupted while starting", nil
		}
		return Failed, err.Error(), err
	}
	if err := c.openNameResolve(ctx); err != nil {
		return fail(err)
	}
	if err := c.clearStaleRecords(ctx); err != nil {
		return fail(err)
	}
	if err := c.serveCtl(ctx); err != nil {
		return fail(err)
	}
	// Restarts run on their own goroutines under rctx, cancelled before
	// the shutdown so that it does not race a restart.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := c.startWorkers(ctx, rctx); err != nil {
		return fail(err)
	}
	c.running = time.Now()
	restarting := ""
	if n := c.restartingProcs(); n > 0 {
		restarting = fmt.Sprintf(" (but %d processes restarting)", n)
	}
	c.out.event("all %d workers running after %s%s", len(c.members), c.running.Sub(c.began).Round(time.Millisecond), restarting)
	c.record.State = StateRunning
	c.writeRecord()
	return c.loop(ctx, rctx)
}

// claimDir creates the trial directory, refuses it if a live controller
// holds it, and writes the configuration snapshot and a first record.
func (c *Controller) claimDir() error {
	for _, sub := range []string{LogsDir, CheckpointsDir} {
		if err := os.MkdirAll(c.dir.Path(sub), 0o755); err != nil {
			return fmt.Errorf("controller: trial directory: %w", err)
		}
	}
	if old, err := c.dir.ReadRecord(); err == nil && old.Alive() && old.PID != os.Getpid() {
		return fmt.Errorf("%w: pid %d since %s (%s)", ErrControllerRunning, old.PID,
			old.Started.Format(time.RFC3339), c.dir.Path(RecordFile))
	}
	snap, err := c.cfg.YAML()
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.dir.Path(ConfigFile), snap, 0o644); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	// A new run starts a new metrics file: mixing runs would make a plot lie.
	c.metrics, err = os.Create(c.dir.Path(MetricsFile))
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	host, _ := os.Hostname()
	c.record = Record{
		PID: os.Getpid(), Host: host, Experiment: c.cfg.Name, Trial: c.opts.Trial,
		Scheduler: c.opts.SchedulerName, State: StateStarting, Started: c.began, Workers: map[string]int{},
	}
	c.writeRecord()
	c.out.event("trial %s/%s in %s", c.cfg.Name, c.opts.Trial, c.dir)
	return nil
}

func (c *Controller) writeRecord() {
	if err := c.dir.writeRecord(&c.record); err != nil {
		c.log.Warn("controller record not written", "err", err)
	}
}
