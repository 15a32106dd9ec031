package controller

import (
	"io"
	"log/slog"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/panel"
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
	// EnvNameResolvePassword carries the etcd password to the workers
	// (rlctl's --nameresolve-password reads it).
	EnvNameResolvePassword = "RLCTL_NAMERESOLVE_PASSWORD"
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
	// NameResolveSecurity is TLS and authentication for the etcd of
	// NameResolve; workers get it as flags, the password in their
	// environment. An embedded etcd uses none.
	NameResolveSecurity etcd.Security
	// WorkerArgs are added to every worker's flags (--log-level, --curve-keys).
	WorkerArgs []string
	// Types describes the worker types of the experiment: where a type
	// keeps checkpoints (worker.Type.CheckpointDir). rlctl passes its
	// registry. Nil: no worker gets a checkpoint directory it was not
	// configured with.
	Types WorkerTypes
	// CUDABinary runs the worker groups whose configuration names a CUDA
	// device (device: cuda:N): rlctl built with the cuda tag. Empty:
	// DefaultCUDABinary (see there).
	CUDABinary string
	// Host is where workers and the controller bind; DefaultHost if empty.
	Host string
	// RemoteWorkers: the workers run on other machines (a cluster
	// scheduler). They get no --host and advertise the address of their
	// interface that routes to the name server, and the name server must
	// be an etcd that answers at a non-loopback address: no embedded one.
	RemoteWorkers bool
	// OrphanTimeout is every worker's --orphan-timeout: they interrupt
	// themselves when the controller's record has been gone this long
	// (the controller died). DefaultOrphanTimeout if zero; negative: never.
	OrphanTimeout time.Duration
	// NoMetrics: the workers serve no Prometheus metrics (rlctl start
	// --no-metrics). By default every worker process serves them on a
	// port of its own (rlctl worker --metrics :0), named in its status
	// records.
	NoMetrics bool
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
	// HungAfter is how long a worker's loop may go without turning before
	// the worker counts as HUNG and is restarted: panel.DefaultHungAfter
	// if zero, negative: never. Workers beat every HungAfter/10 (at most
	// every second, at least every 100 ms; a trial of more than 1000
	// workers beats every 1 ms per worker, at most HungAfter/3).
	HungAfter time.Duration
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
	if o.HungAfter == 0 {
		o.HungAfter = panel.DefaultHungAfter
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
	if o.CUDABinary == "" {
		o.CUDABinary = DefaultCUDABinary()
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
