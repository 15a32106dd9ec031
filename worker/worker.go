package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/distrl/distrl/internal/monoclock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// ErrTypeBadState is the rpc error type of a command that the worker's
// current state does not allow (start before configure, say).
const ErrTypeBadState = "bad_state"

// ErrNameTaken: another live worker holds this worker's name.
var ErrNameTaken = errors.New("worker name already taken")

// ErrFailed: the worker ended in ERROR.
var ErrFailed = errors.New("worker failed")

// Defaults of Options.
const (
	DefaultAddressTTL      = 10 * time.Second
	DefaultStatusTTL       = 30 * time.Second
	DefaultRequestsPerLoop = 64
	DefaultIdleWait        = 100 * time.Millisecond
	DefaultHeartbeat       = time.Second
	DefaultSpinWait        = 200 * time.Microsecond
	DefaultConditionHold   = 5 * time.Second
)

// Options configure a Worker.
type Options struct {
	Trial names.Trial
	// Registry holds the worker types; Type must be one of them.
	Registry *Registry
	Type     string
	// Group names the worker's group, {group}/{index}; empty: Type.
	Group string
	Index int
	// Host is the interface the server binds and the address it advertises;
	// "" means RoutableHost().
	Host string
	// Port 0 picks a free port.
	Port int
	Repo nameresolve.Repository
	// AddressTTL bounds how long the address record outlives a killed worker.
	AddressTTL time.Duration
	// StatusTTL bounds how long the status record outlives a killed worker.
	StatusTTL time.Duration
	// MaxPayload is the largest request the server accepts (0: rpc default).
	MaxPayload int
	Curve      *rpc.CurveKeyPair
	Logger     *slog.Logger
	// RequestsPerLoop caps the requests answered between two polls.
	RequestsPerLoop int
	// IdleWait is how long an idle worker waits on its socket per loop.
	IdleWait time.Duration
	// RegisterWait is how long registering the address keeps trying a
	// name server that is unavailable (busy, restarting); 0: one try.
	RegisterWait time.Duration
	// SpinWait is how long the loop looks for input in shared memory
	// (MemoryWaiter), yielding the CPU between looks, before it sleeps,
	// while the recent waits were shorter than that on average; 0 means
	// DefaultSpinWait, a negative value never looks.
	SpinWait time.Duration
	// Heartbeat is how often the loop refreshes its loop record
	// (LoopRecord); it must be well under the HungAfter of the panels
	// watching the worker.
	Heartbeat time.Duration
	// Metrics is the process's registry the workers record into; nil: a
	// registry of the workers' own, which nothing serves.
	Metrics *telemetry.Registry
	// MetricsAddr is the "host:port" serving Metrics at /metrics, written
	// into the status records for service discovery; "": not served.
	MetricsAddr string
	// ConditionHold is how long a warning or a note (Reporter, Noter) must
	// have been clear before the status record drops it and the log says
	// it is over: DefaultConditionHold if zero, negative: at once.
	ConditionHold time.Duration
}

// group is the worker's group: Group, or Type.
func (o *Options) group() string { return cmp.Or(o.Group, o.Type) }

func (o *Options) setDefaults() {
	if o.Host == "" {
		o.Host = RoutableHost()
	}
	if o.AddressTTL <= 0 {
		o.AddressTTL = DefaultAddressTTL
	}
	if o.StatusTTL <= 0 {
		o.StatusTTL = DefaultStatusTTL
	}
	if o.RequestsPerLoop <= 0 {
		o.RequestsPerLoop = DefaultRequestsPerLoop
	}
	if o.IdleWait <= 0 {
		o.IdleWait = DefaultIdleWait
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.SpinWait == 0 {
		o.SpinWait = DefaultSpinWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ConditionHold == 0 {
		o.ConditionHold = DefaultConditionHold
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewRegistry()
	}
}

// Worker is one worker: its commands, its records and its lifecycle, on a
// server it may share with the other workers of its process (NewHosted).
// All its state is owned by the goroutine running it (Run, RunMany);
// handlers run on that goroutine too.
type Worker struct {
	opts Options
	name string
	impl Impl
	host *host
	mux  *rpc.Mux
	log  *slog.Logger

	state     member.State
	errMsg    string
	warning   condition     // the type's Reporter
	note      condition     // the type's Noter
	watched   []*zmq.Socket // nil: not watching (not RUNNING, or nothing to watch)
	watchedFd []int         // the FdWaiter's descriptors, while watched is non-nil
	rewatch   bool          // the type's sockets may have changed: watch them again
	watchGen  int           // changes whenever watched or watchedFd does (RunMany's wait follows it)
	// dueAt is when a Deadliner's own work comes due, fixed when the loop
	// first waits after the worker's last Poll (zero: not asked yet).
	// IdleFor counts from when it is asked, so asking again at every wake
	// would push a constant deadline back for as long as other input kept
	// waking the loop, and a deadline met by the wait's timeout would not
	// count as met when asked again after it.
	dueAt time.Time
	// socketsVersion is the SocketSetter's version when its sockets were
	// last watched.
	socketsVersion uint64
	served         uint64
	exiting        bool
	exitState      member.State

	status  *recordWriter
	stats   counters
	metrics *telemetry.Worker
}

// newWorker creates one worker of h, routes its requests and registers its address.
func newWorker(ctx context.Context, opts Options, factory Factory, h *host) (*Worker, error) {
	name := names.WorkerName(opts.group(), opts.Index)
	log := opts.Logger.With("worker", name)
	metrics := opts.Metrics.Worker(telemetry.Identity{
		Experiment: opts.Trial.Experiment, Trial: opts.Trial.Trial, Type: opts.Type, Index: opts.Index, Group: opts.group(),
	})
	metrics.SetLoop(h.metricsLoop)
	metrics.SetState(string(member.StateReady))
	impl, err := factory(Info{
		Name: name, Type: opts.Type, Group: opts.group(), Index: opts.Index, Trial: opts.Trial,
		Host: opts.Host, TTL: opts.AddressTTL, Repo: opts.Repo, Logger: log, Curve: opts.Curve,
		Metrics: metrics,
	})
	if err != nil {
		metrics.Remove()
		return nil, fmt.Errorf("worker %s: %w", name, err)
	}
	w := &Worker{opts: opts, name: name, impl: impl, host: h, log: log, state: member.StateReady, metrics: metrics,
		warning: condition{onset: "degraded", changed: "warning changed", over: "recovered", key: "warning", level: slog.LevelWarn, hold: opts.ConditionHold, rewrite: time.Second},
		// A note is about the last minute: asking for it once a second keeps
		// its computation off the loop's every turn.
		note: condition{onset: "note", changed: "note changed", over: "note over", key: "note", level: slog.LevelInfo, hold: opts.ConditionHold, rewrite: 15 * time.Second, ask: time.Second}}
	w.stats.start = time.Now()
	w.stats.stateChanged = w.stats.start
	// A worker alone on its server also answers requests that name no
	// worker, as plain [command, kwargs] clients send them.
	w.mux = rpc.NewMux()
	if h.size == 1 {
		w.mux = h.srv.Mux()
	}
	if err := w.commands(w.mux); err != nil {
		_ = impl.Close()
		metrics.Remove()
		return nil, err
	}
	w.mux.SetObserver(metrics.Request)
	h.srv.Route(name, w.mux)
	if err := w.register(ctx); err != nil {
		h.srv.Unroute(name)
		_ = impl.Close()
		metrics.Remove()
		return nil, err
	}
	w.status = newRecordWriter(opts.Repo, opts.Trial.Status(name), opts.StatusTTL, log)
	w.status.publish(w.currentStatus().Record())
	log.Info("worker ready", "address", h.srv.Addr(), "trial", opts.Trial.Prefix())
	return w, nil
}

func (w *Worker) register(ctx context.Context) error {
	key := w.opts.Trial.Worker(w.name)
	opts := nameresolve.AddOptions{TTL: w.opts.AddressTTL, DeleteOnExit: true}
	err := nameresolve.RetryUnavailable(ctx, w.opts.RegisterWait, func() error {
		return w.opts.Repo.Add(ctx, key, w.Addr(), opts)
	}, func(err error, in time.Duration) {
		// The try that timed out may have been written all the same: then
		// the record holding our own address (no other process can have
		// bound it) is ours to take over.
		holder, gerr := w.opts.Repo.Get(ctx, key)
		opts.Replace = gerr == nil && holder == w.Addr()
		w.log.Warn("name server unavailable; registering again", "in", in, "err", err)
	})
	if errors.Is(err, nameresolve.ErrKeyExists) {
		holder, _ := w.opts.Repo.Get(ctx, key)
		return fmt.Errorf("worker %s of %s: %w: a live worker is registered at %s",
			w.name, w.opts.Trial.Prefix(), ErrNameTaken, holder)
	}
	if err != nil {
		return fmt.Errorf("worker %s: register address: %w", w.name, err)
	}
	return nil
}

// Name is "{type}/{index}".
func (w *Worker) Name() string { return w.name }

// Addr is the "host:port" the worker answers on (with the other workers
// of its process).
func (w *Worker) Addr() string { return w.host.srv.Addr() }

// Run is the worker loop. It returns when the worker is told to exit or
// interrupt, or when ctx ends (which counts as an interrupt). The returned
// error wraps ErrFailed if the worker ended in ERROR.
func (w *Worker) Run(ctx context.Context) error { return RunMany(ctx, []*Worker{w}) }

// waitFor is how long the idle worker may sleep: IdleWait, or less when
// its type has work due at a time of its own (Deadliner).
func (w *Worker) waitFor(now time.Time) time.Duration {
	d, ok := w.impl.(Deadliner)
	if !ok || w.state != member.StateRunning {
		return w.opts.IdleWait
	}
	if w.dueAt.IsZero() {
		w.dueAt = now.Add(max(d.IdleFor(), time.Millisecond))
	}
	return min(w.opts.IdleWait, max(w.dueAt.Sub(now), 0))
}

// deadlineDue reports whether a Deadliner's own deadline has come.
func (w *Worker) deadlineDue(now time.Time) bool {
	return w.state == member.StateRunning && !w.dueAt.IsZero() && !now.Before(w.dueAt)
}

// step is one turn of the worker in its loop, after the loop answered
// the requests queued: one Poll if RUNNING. idle means it had nothing to
// do, so the loop may wait on the sockets.
func (w *Worker) step(ctx context.Context) (idle bool) {
	if ctx.Err() != nil {
		w.exit(member.StateInterrupted)
		return false
	}
	idle = true
	if w.state == member.StateRunning && !w.exiting {
		idle = w.poll(ctx).idle()
	}
	// The commands answered before this step (configure, start, pause) and
	// Poll itself (SocketSetter) may have changed the type's sockets or the
	// worker's state: the wait that follows watches what there is now.
	w.watch()
	return idle
}

// requested reports whether requests reached the worker since it last asked.
func (w *Worker) requested() bool {
	n := w.mux.Served()
	if n == w.served {
		return false
	}
	w.served = n
	return true
}

// result is Run's error once the loop is over.
func (w *Worker) result() error {
	if w.state == member.StateError {
		return fmt.Errorf("worker %s: %w: %s", w.name, ErrFailed, w.errMsg)
	}
	return nil
}

// poll runs one Poll, turning an error or a panic into ERROR.
func (w *Worker) poll(ctx context.Context) (res PollResult) {
	begin := monoclock.Now()
	var end time.Time // when Poll returned; zero if it panicked
	defer func() {
		if end.IsZero() {
			end = monoclock.Now()
		}
		took := end.Sub(begin)
		w.stats.pollTime += took
		w.metrics.PollSeconds.Add(took.Seconds())
		if r := recover(); r != nil {
			w.failPanic("poll", r)
			res = PollResult{}
		}
	}()
	w.dueAt = time.Time{} // asked again before the next wait
	res, err := w.impl.Poll(ctx)
	end = monoclock.Now()
	w.updateConditions(end)
	w.stats.polls++
	w.metrics.Polls.Inc()
	w.stats.samples += res.Samples
	w.stats.batches += res.Batches
	switch {
	case err != nil && ctx.Err() != nil:
		// The loop is being stopped (SIGTERM, cancel) and the slice of work
		// was cut short by it: an interruption, not a failure of the work.
		w.log.Debug("poll cut short by shutdown", "err", err)
	case err != nil:
		w.fail(fmt.Errorf("poll: %w", err))
	case res.Done:
		w.setState(member.StateCompleted)
	}
	return res
}

// prepareWait is the FdWaiter's PrepareWait (true for other types): false
// means input is there, so the loop must not sleep on the worker.
func (w *Worker) prepareWait() bool {
	fw, ok := w.impl.(FdWaiter)
	if !ok {
		return true
	}
	return !w.callAsking("prepare wait", func() bool { return !fw.PrepareWait() })
}

// inputReady is the MemoryWaiter's InputReady (false, false for other
// types): whether input is waiting in memory, and whether any can come
// there (a peer is attached).
func (w *Worker) inputReady() (ready, peers bool) {
	mw, ok := w.impl.(MemoryWaiter)
	if !ok {
		return false, false
	}
	ready = w.callAsking("look for input", func() bool {
		ready, peers = mw.InputReady()
		return ready
	})
	return ready, peers
}

// callAsking calls ask, a question to the worker's type whose true means
// "step the worker". A panic in it moves the worker to ERROR, as one in
// Poll does, and counts as true, so that the worker steps and stops being
// watched.
func (w *Worker) callAsking(what string, ask func() bool) (step bool) {
	defer func() {
		if r := recover(); r != nil {
			w.failPanic(what, r)
			step = true
		}
	}()
	return ask()
}

// failPanic moves the worker to ERROR after what (a call into its type)
// panicked with r, logging the stack. Call it from the deferred recover.
func (w *Worker) failPanic(what string, r any) {
	w.log.Error(what+" panicked", "panic", r, "stack", string(debug.Stack()))
	w.fail(fmt.Errorf("%s panicked: %v", what, r))
}

// updateConditions takes the type's warning and note (Reporter, Noter)
// and writes the status record when what it shows changes.
func (w *Worker) updateConditions(now time.Time) {
	write := false
	if r, ok := w.impl.(Reporter); ok {
		write = w.warning.update(now, r.Warning(), w.log)
	}
	if n, ok := w.impl.(Noter); ok && w.note.due(now) {
		write = w.note.update(now, n.Note(), w.log) || write
	}
	if write {
		w.status.publish(w.currentStatus().Record())
	}
}

// settleConditions shows the type's warning and note as they are now:
// the worker is done, and its last record must not hold a warning that
// has cleared.
func (w *Worker) settleConditions() {
	now := time.Now()
	if r, ok := w.impl.(Reporter); ok {
		w.warning.settle(now, r.Warning(), w.log)
	}
	if n, ok := w.impl.(Noter); ok {
		w.note.settle(now, n.Note(), w.log)
	}
}

// watch is syncWatched, failing the worker if it cannot.
func (w *Worker) watch() {
	if err := w.syncWatched(); err != nil {
		w.fail(fmt.Errorf("watch the worker's sockets: %w", err))
	}
}

// syncWatched makes the idle wait include the type's own sockets and
// descriptors while the worker is RUNNING, and only then: input that
// nothing reads (requests to a paused policy worker, a parameter
// notification) would otherwise wake the wait at once, every time, and spin
// the loop.
func (w *Worker) syncWatched() error {
	so, isOwner := w.impl.(SocketOwner)
	fw, isWaiter := w.impl.(FdWaiter)
	want := (isOwner || isWaiter) && w.state == member.StateRunning && !w.exiting
	if ss, ok := w.impl.(SocketSetter); ok && want {
		if v := ss.SocketsVersion(); v != w.socketsVersion {
			w.socketsVersion, w.rewatch = v, true
		}
	}
	if !w.rewatch && want == (w.watched != nil) {
		return nil
	}
	w.rewatch = false
	w.watched, w.watchedFd = nil, nil
	w.watchGen++
	if !want {
		return nil
	}
	w.watched = []*zmq.Socket{} // non-nil: watching, even with no sockets
	if isOwner {
		for _, s := range so.Sockets() {
			if s != nil {
				w.watched = append(w.watched, s)
			}
		}
	}
	if isWaiter {
		for _, fd := range fw.WaitFds() {
			if fd >= 0 { // as a nil socket: a channel not open (yet)
				w.watchedFd = append(w.watchedFd, fd)
			}
		}
	}
	return nil
}

// fail moves the worker to ERROR with err's message visible through status.
func (w *Worker) fail(err error) {
	w.log.Error("worker error", "err", err)
	w.errMsg = err.Error()
	w.setState(member.StateError)
}

func (w *Worker) setState(s member.State) {
	if w.state == s {
		return
	}
	w.log.Info("state", "from", w.state, "to", s)
	w.state = s
	if s.Final() {
		w.settleConditions()
	}
	w.metrics.SetState(string(s))
	w.stats.stateChanged = time.Now()
	w.status.publish(w.currentStatus().Record())
}

// exit ends the loop in state final, unless the worker already failed or
// completed: those outcomes are kept.
func (w *Worker) exit(final member.State) {
	w.exiting = true
	switch w.state {
	case member.StateError, member.StateCompleted:
		w.exitState = w.state
	default:
		w.exitState = final
	}
}

func (w *Worker) currentStatus() member.Status {
	s := member.ProcessStatus(w.name, w.state, w.Addr(), w.stats.stateChanged)
	s.Error, s.Warning, s.Note, s.Metrics = w.errMsg, w.warning.shown, w.note.shown, w.opts.MetricsAddr
	if w.opts.group() != w.opts.Type {
		s.Type = w.opts.Type
	}
	s.Loop, s.Loops = w.host.loopID, w.host.turns
	if !w.host.beat.IsZero() {
		s.HeartbeatMs = w.host.beat.UnixMilli()
	}
	return s
}

// shutdown leaves a final status record with no lease (it stays until the
// trial is cleared), removes the address record and releases everything.
func (w *Worker) shutdown() {
	if !w.exiting {
		w.exit(member.StateInterrupted)
	}
	w.state = w.exitState
	w.stats.stateChanged = time.Now()
	w.status.close(w.currentStatus().Record())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := w.opts.Repo.Delete(ctx, w.opts.Trial.Worker(w.name)); err != nil &&
		!errors.Is(err, nameresolve.ErrNotFound) {
		w.log.Warn("address record not removed", "err", err)
	}
	w.host.srv.Unroute(w.name)
	if err := w.impl.Close(); err != nil {
		w.log.Warn("close worker implementation", "err", err)
	}
	w.metrics.Remove()
	w.host.release()
	w.log.Info("worker exited", "state", w.state)
}
