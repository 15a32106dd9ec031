package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
)

// Defaults of Options.
const (
	// DefaultWorkerTTL is the workers' address lease: short, so that a
	// killed worker's name is free for its replacement within seconds.
	DefaultWorkerTTL       = 3 * time.Second
	DefaultMonitorInterval = time.Second
	DefaultStopGrace       = 10 * time.Second
	DefaultOrphanTimeout   = 15 * time.Second
	// DefaultHost is where local workers and the controller bind.
	DefaultHost = "127.0.0.1"
	// CtlName is the controller's name among the trial's workers.
	CtlName = "ctl"
)

// Timeouts of single steps, generous for a loaded 2-core machine.
const (
	requestTimeout   = 30 * time.Second // configure, start, on each group
	statsTimeout     = 3 * time.Second
	shutdownTimeout  = 5 * time.Second // each shutdown step
	probeTimeout     = 300 * time.Millisecond
	etcdDialTimeout  = 3 * time.Second
	registerPoll     = 100 * time.Millisecond
	logTailBytes     = 2048
	registerBase     = 30 * time.Second
	registerPerProc  = 250 * time.Millisecond
	interruptTimeout = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Config is the experiment, validated.
	Config *experiment.Config
	// Trial names the trial.
	Trial string
	// Dir is the trial directory; created if missing.
	Dir TrialDir
	// Scheduler runs the workers; SchedulerName goes into the record.
	Scheduler     Scheduler
	SchedulerName string
	// NameResolve are the etcd endpoints to use. If none answers, the
	// controller runs an embedded etcd for the trial's lifetime.
	NameResolve []string
	// WorkerArgs are added to every worker's flags (--log-level, --curve-keys).
	WorkerArgs []string
	// Host is where workers and the controller bind; DefaultHost if empty.
	Host string
	// RemoteWorkers: the workers run on other machines (a cluster
	// scheduler). They get no --host and advertise the address of their
	// interface that routes to the name server, and the name server must
	// be an etcd that answers at a non-loopback address: no embedded one.
	RemoteWorkers bool
	// OrphanTimeout is remote workers' --orphan-timeout: they interrupt
	// themselves when the controller's record has been gone this long
	// (the controller died). DefaultOrphanTimeout if zero; negative: never.
	OrphanTimeout time.Duration
	// Curve is the experiment's key pair when workers run with CURVE.
	Curve *rpc.CurveKeyPair
	// Out receives progress; nil discards it. TTY redraws the status line
	// in place instead of printing a line per interval.
	Out io.Writer
	TTY bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger

	// WorkerTTL is the workers' --ttl; DefaultWorkerTTL if zero.
	WorkerTTL time.Duration
	// RegisterTimeout bounds the wait for every worker to register; zero
	// means 30 s plus 250 ms per worker.
	RegisterTimeout time.Duration
	// MonitorInterval is how often worker states are checked.
	MonitorInterval time.Duration
	// StopGrace is how long workers may take to exit when told to before
	// they are signalled, then killed.
	StopGrace time.Duration
}

func (o *Options) setDefaults() {
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WorkerTTL <= 0 {
		o.WorkerTTL = DefaultWorkerTTL
	}
	if o.MonitorInterval <= 0 {
		o.MonitorInterval = DefaultMonitorInterval
	}
	if o.OrphanTimeout == 0 {
		o.OrphanTimeout = DefaultOrphanTimeout
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.SchedulerName == "" {
		o.SchedulerName = "local"
	}
}

// Outcome is how a trial ended.
type Outcome int

const (
	// Completed: a stop condition held, or the controller was told to exit.
	Completed Outcome = iota + 1
	// Interrupted: the context was cancelled (Ctrl-C, SIGTERM, `rlctl stop`).
	Interrupted
	// Failed: the trial could not start, or a worker failed past its restarts.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Completed:
		return "completed"
	case Interrupted:
		return "interrupted"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Result is what Run reports.
type Result struct {
	Outcome Outcome
	// Reason says why the trial ended, in words.
	Reason string
	// Startup is from Run to every worker running; Elapsed from then to the stop.
	Startup, Elapsed time.Duration
	// Metrics is the last metrics line; nil if the workers never ran.
	Metrics  *Metrics
	Restarts int
	Dir      TrialDir
}

// member is one worker of the trial as the controller sees it. Only the
// controller's loop goroutine touches members.
type member struct {
	spec       WorkerSpec
	handle     Handle
	restarts   int
	restarting bool
	// finished: the process exited after its worker completed; it is not restarted.
	finished  bool
	lastState worker.State
	lastStats map[string]any
	base      counters
}

type exitEvent struct {
	name   string
	handle Handle
	err    error
}

type restartResult struct {
	name   string
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
	panel    *worker.ControlPanel
	ctl      *rpc.Server
	metrics  *os.File

	members []*member // in start order
	byName  map[string]*member

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
	c := &Controller{
		opts: opts, cfg: opts.Config, dir: opts.Dir, log: opts.Logger,
		out:   &progress{out: opts.Out, tty: opts.TTY},
		trial: names.NewTrial(opts.Config.Name, opts.Trial),
		began: time.Now(), stopReq: make(chan stopRequest, 1), quit: make(chan struct{}),
		byName: map[string]*member{},
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
	if err := c.startWorkers(ctx); err != nil {
		return fail(err)
	}
	c.running = time.Now()
	c.out.event("all %d workers running after %s", len(c.members), c.running.Sub(c.began).Round(time.Millisecond))
	c.record.State = StateRunning
	c.writeRecord()
	return c.loop(ctx)
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

// openNameResolve connects to the configured etcd, or runs an embedded one
// when none answers.
func (c *Controller) openNameResolve(ctx context.Context) error {
	if c.opts.RemoteWorkers {
		return c.openRemoteNameResolve(ctx)
	}
	if len(c.opts.NameResolve) > 0 && anyAnswers(ctx, c.opts.NameResolve) {
		repo, err := etcd.Open(ctx, etcd.Config{Endpoints: c.opts.NameResolve, DialTimeout: etcdDialTimeout, Logger: c.log})
		if err == nil {
			c.repo, c.endpoint = repo, strings.Join(c.opts.NameResolve, ",")
			c.out.event("name resolve: etcd at %s", c.endpoint)
			c.record.NameResolve = c.endpoint
			return nil
		}
		c.log.Warn("the name server answers but not as etcd: running an embedded etcd", "endpoints", c.opts.NameResolve, "err", err)
	}
	// The embedded etcd lives as long as this run: its data from an
	// earlier run of the trial is of no use.
	dir := c.dir.Path(EtcdDir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("controller: embedded etcd: %w", err)
	}
	etcdLog := slog.New(quietable{Handler: c.log.Handler(), quiet: &c.etcdQuiet})
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Dir: dir, ClientAddr: net.JoinHostPort(c.opts.Host, "0"), Logger: etcdLog})
	if err != nil {
		return fmt.Errorf("controller: embedded etcd: %w", err)
	}
	c.etcd = srv
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: etcdDialTimeout, Logger: c.log})
	if err != nil {
		return fmt.Errorf("controller: embedded etcd: %w", err)
	}
	c.repo, c.endpoint = repo, srv.Endpoint()
	c.record.NameResolve, c.record.EmbeddedEtcd = c.endpoint, true
	c.out.event("name resolve: embedded etcd at %s (none answered at %s)", c.endpoint, strings.Join(c.opts.NameResolve, ","))
	c.writeRecord()
	return nil
}

// openRemoteNameResolve connects to the etcd of NameResolve, which workers
// on other machines must reach: loopback is refused, and nothing is embedded.
func (c *Controller) openRemoteNameResolve(ctx context.Context) error {
	if err := CheckRemoteNameResolve(c.opts.NameResolve); err != nil {
		return err
	}
	if !anyAnswers(ctx, c.opts.NameResolve) {
		return fmt.Errorf("%w: nothing answers at %s (start one with `rlctl nameserver --listen ADDR` on a host the nodes reach)",
			ErrNameResolve, strings.Join(c.opts.NameResolve, ","))
	}
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: c.opts.NameResolve, DialTimeout: etcdDialTimeout, Logger: c.log})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNameResolve, err)
	}
	c.repo, c.endpoint = repo, strings.Join(c.opts.NameResolve, ",")
	c.out.event("name resolve: etcd at %s", c.endpoint)
	c.record.NameResolve = c.endpoint
	return nil
}

// CheckRemoteNameResolve refuses endpoints that workers on other machines
// cannot reach: none, or a loopback address or name.
func CheckRemoteNameResolve(endpoints []string) error {
	if len(endpoints) == 0 {
		return fmt.Errorf("%w: no etcd endpoint given", ErrNameResolve)
	}
	for _, ep := range endpoints {
		host := ep
		if i := strings.Index(host, "://"); i >= 0 {
			host = host[i+3:]
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" || host == "" {
			return fmt.Errorf("%w: %s is a loopback address, which workers on other nodes cannot reach "+
				"(run `rlctl nameserver --listen ADDR:2379` on a host the nodes reach, and give --nameresolve ADDR:2379)", ErrNameResolve, ep)
		}
	}
	return nil
}

// anyAnswers reports whether some endpoint accepts a TCP connection: a
// quick check before etcd.Open, which would take its full dial timeout to
// fail on a port nobody listens on.
func anyAnswers(ctx context.Context, endpoints []string) bool {
	d := net.Dialer{Timeout: probeTimeout}
	for _, ep := range endpoints {
		hostport := ep
		if i := strings.Index(ep, "://"); i >= 0 {
			hostport = ep[i+3:]
		}
		if conn, err := d.DialContext(ctx, "tcp", hostport); err == nil {
			conn.Close()
			return true
		}
	}
	return false
}

// clearStaleRecords refuses a trial whose workers are alive and clears the
// records a dead run left behind.
func (c *Controller) clearStaleRecords(ctx context.Context) error {
	c.panel = worker.NewControlPanel(c.repo, c.trial, c.panelOptions())
	ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
	defer cancel()
	ws, err := c.panel.Workers(ctx)
	if err != nil {
		return fmt.Errorf("controller: read the trial's records: %w", err)
	}
	var alive []string
	for _, w := range ws {
		if w.Address != "" {
			alive = append(alive, w.Name)
		}
	}
	if len(alive) > 0 {
		return &WorkersAliveError{Prefix: c.trial.Prefix(), Workers: alive}
	}
	if err := c.repo.ClearSubtree(ctx, c.trial.Prefix()); err != nil {
		return fmt.Errorf("controller: clear the records of an earlier run: %w", err)
	}
	c.owner = true
	return nil
}

func (c *Controller) panelOptions() worker.PanelOptions {
	var opts worker.PanelOptions
	if c.opts.Curve != nil {
		opts.Curve = c.opts.Curve.ClientKeys()
	}
	return opts
}

// workerArgs are the flags every worker of the trial gets.
func (c *Controller) workerArgs() []string {
	args := []string{"--nameresolve", c.endpoint, "--experiment", c.trial.Experiment, "--trial", c.trial.Trial}
	if !c.opts.RemoteWorkers {
		args = append(args, "--host", c.opts.Host)
	} else if c.opts.OrphanTimeout > 0 {
		args = append(args, "--orphan-timeout", c.opts.OrphanTimeout.String())
	}
	args = append(args, "--ttl", c.opts.WorkerTTL.String())
	return append(args, c.opts.WorkerArgs...)
}

// groupSpecs are the worker specs of every group, in start order.
func groupSpecs(cfg *experiment.Config, dir TrialDir, args []string) [][]WorkerSpec {
	var out [][]WorkerSpec
	for _, typ := range cfg.Types() {
		g := cfg.Workers[typ]
		specs := make([]WorkerSpec, g.Count)
		for i := range specs {
			name := names.WorkerName(typ, i)
			specs[i] = WorkerSpec{Type: typ, Index: i, Name: name, Args: args, LogPath: dir.Log(name), Resources: g.Resources}
		}
		out = append(out, specs)
	}
	return out
}

// workerConfig is the configure kwargs of one worker.
func (c *Controller) workerConfig(typ string, index int) map[string]any {
	kw := c.cfg.WorkerConfig(typ, index)
	if _, ok := kw["checkpoint_dir"]; !ok && typ == worker.TypeTrainer {
		kw["checkpoint_dir"] = c.dir.Path(CheckpointsDir)
	}
	return kw
}

// startWorkers launches every worker, waits for all to register, then
// configures and starts them group by group in start order.
func (c *Controller) startWorkers(ctx context.Context) error {
	for _, specs := range groupSpecs(c.cfg, c.dir, c.workerArgs()) {
		hs, err := startGroup(ctx, c.opts.Scheduler, specs)
		for i, h := range hs {
			m := &member{spec: specs[i], handle: h}
			c.members = append(c.members, m)
			c.byName[m.spec.Name] = m
			c.record.Workers[m.spec.Name] = h.PID()
		}
		if err != nil {
			return err
		}
	}
	c.writeRecord()
	c.exited = make(chan exitEvent, len(c.members))
	c.restarted = make(chan restartResult, len(c.members))
	c.out.event("started %d workers (%s scheduler); logs in %s", len(c.members), c.opts.SchedulerName, c.dir.Path(LogsDir))

	timeout := c.opts.RegisterTimeout
	if timeout <= 0 {
		timeout = registerBase + time.Duration(len(c.members))*registerPerProc
	}
	all := make(map[string]Handle, len(c.members))
	for _, m := range c.members {
		all[m.spec.Name] = m.handle
	}
	if err := c.waitRegistered(ctx, all, timeout); err != nil {
		return err
	}
	c.out.event("all %d workers registered after %s", len(c.members), time.Since(c.began).Round(time.Millisecond))
	for _, m := range c.members {
		c.watch(m.spec.Name, m.handle)
	}
	// Each group is configured and started before the next is configured:
	// a policy worker fetches the newest parameters when it is configured,
	// and a trainer answers only once it runs.
	for _, typ := range c.cfg.Types() {
		if err := c.configureGroup(ctx, c.group(typ)); err != nil {
			return err
		}
		if err := c.requestGroup(ctx, c.group(typ), worker.CmdStart, nil); err != nil {
			return err
		}
	}
	return nil
}

// group lists the members of one type, by index.
func (c *Controller) group(typ string) []*member {
	var out []*member
	for _, m := range c.members {
		if m.spec.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// waitRegistered waits until every worker in procs has an address record
// and connects the panel to them. A worker whose process exits first, or
// that is still missing at the timeout, fails the wait.
func (c *Controller) waitRegistered(ctx context.Context, procs map[string]Handle, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(registerPoll)
	defer tick.Stop()
	for {
		entries, err := c.repo.Find(ctx, c.trial.WorkerPrefix())
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		registered := map[string]bool{}
		for _, e := range entries {
			registered[strings.TrimPrefix(e.Key, c.trial.WorkerPrefix())] = true
		}
		var missing, exited []Unregistered
		for name, h := range procs {
			if registered[name] {
				continue
			}
			u := Unregistered{Worker: name, Log: c.dir.Log(name)}
			select {
			case <-h.Done():
				u.Exit, u.Tail = describeExit(h.Wait()), tail(u.Log, logTailBytes)
				exited = append(exited, u)
			default:
			}
			missing = append(missing, u)
		}
		if len(exited) > 0 {
			return &RegisterError{Timeout: timeout, Missing: sortUnregistered(exited)}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			for i := range missing {
				missing[i].Tail = tail(missing[i].Log, 512)
			}
			return &RegisterError{Timeout: timeout, Missing: sortUnregistered(missing)}
		case <-tick.C:
		}
	}
	names := make([]string, 0, len(procs))
	for n := range procs {
		names = append(names, n)
	}
	slices.Sort(names)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.panel.Connect(ctx, names...)
}

func sortUnregistered(u []Unregistered) []Unregistered {
	slices.SortFunc(u, func(a, b Unregistered) int { return strings.Compare(a.Worker, b.Worker) })
	return u
}

// configureGroup sends each member its own configuration, all at once.
func (c *Controller) configureGroup(ctx context.Context, ms []*member) error {
	kwargs := make([]any, len(ms))
	for i, m := range ms {
		kwargs[i] = c.workerConfig(m.spec.Type, m.spec.Index)
	}
	return c.requestEach(ctx, ms, worker.CmdConfigure, kwargs)
}

// requestGroup sends the same command to every member at once.
func (c *Controller) requestGroup(ctx context.Context, ms []*member, cmd string, kwargs any) error {
	each := make([]any, len(ms))
	for i := range each {
		each[i] = kwargs
	}
	return c.requestEach(ctx, ms, cmd, each)
}

func (c *Controller) requestEach(ctx context.Context, ms []*member, cmd string, kwargs []any) error {
	if len(ms) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.spec.Name
	}
	failures := map[string]error{}
	for _, r := range c.panel.GroupRequestEach(ctx, names, cmd, kwargs) {
		if r.Err != nil {
			failures[r.Worker] = r.Err
		}
	}
	if len(failures) > 0 {
		return &ConfigureError{Command: cmd, Failures: failures}
	}
	return nil
}

// watch reports the exit of h, the process of worker name, to the loop.
func (c *Controller) watch(name string, h Handle) {
	go func() {
		select {
		case <-h.Done():
		case <-c.quit:
			return
		}
		select {
		case c.exited <- exitEvent{name: name, handle: h, err: h.Wait()}:
		case <-c.quit:
		}
	}()
}

// describeExit says how a process ended.
func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Error()
	}
	return err.Error()
}

// tail returns the last n bytes of a file, from a line start where it can.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}

// serveCtl runs the controller's own server and records: the trial's
// member "ctl", which answers ping, status, stats, interrupt and exit.
func (c *Controller) serveCtl(ctx context.Context) error {
	mux := rpc.NewMux()
	srv, err := rpc.NewServer(rpc.ServerOptions{Host: c.opts.Host, Curve: c.opts.Curve, Logger: c.log, Mux: mux})
	if err != nil {
		return fmt.Errorf("controller: server: %w", err)
	}
	c.ctl = srv
	status := worker.ProcessStatus(CtlName, worker.StateRunning, srv.Addr(), time.Now())
	member := worker.MemberCommands{
		Status: func() worker.Status { return status },
		Stats:  c.lastMetrics,
		Stop: func(final worker.State) worker.Status {
			req := stopRequest{outcome: Completed, reason: "stopped by request"}
			if final == worker.StateInterrupted {
				req = stopRequest{outcome: Interrupted, reason: "interrupted by request"}
			}
			select {
			case c.stopReq <- req:
			default: // a stop is already pending
			}
			return status
		},
	}
	if err := member.Register(mux); err != nil {
		return fmt.Errorf("controller: server: %w", err)
	}
	go func() {
		// Serve ends when shutdown closes the server; ctx is not used
		// because the controller must answer while it stops.
		if err := srv.Serve(context.Background()); err != nil && !errors.Is(err, rpc.ErrClosed) {
			c.log.Debug("controller server stopped", "err", err)
		}
	}()
	// The address record is create-only, so two controllers of one trial
	// cannot both run even if they race past clearStaleRecords.
	if err := c.repo.Add(ctx, c.trial.Worker(CtlName), srv.Addr(), nameresolve.AddOptions{TTL: c.opts.WorkerTTL}); err != nil {
		if errors.Is(err, nameresolve.ErrKeyExists) {
			c.owner = false
			return fmt.Errorf("%w (its record is %s)", ErrControllerRunning, c.trial.Worker(CtlName))
		}
		return fmt.Errorf("controller: register: %w", err)
	}
	if err := c.repo.Add(ctx, c.trial.Status(CtlName), status.Record(), nameresolve.AddOptions{TTL: c.opts.WorkerTTL, Replace: true}); err != nil {
		return fmt.Errorf("controller: register: %w", err)
	}
	return nil
}

func (c *Controller) lastMetrics() any {
	c.lastMu.Lock()
	defer c.lastMu.Unlock()
	out := map[string]any{}
	if c.last != nil {
		// Metrics carries json tags only: hand msgpack the JSON form.
		b, err := json.Marshal(c.last)
		if err == nil {
			_ = json.Unmarshal(b, &out)
		}
	}
	return out
}

func pidString(h Handle) string {
	if h == nil || h.PID() == 0 {
		return "-"
	}
	return strconv.Itoa(h.PID())
}
