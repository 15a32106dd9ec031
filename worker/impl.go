package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/telemetry"
	zmq "github.com/pebbe/zmq4"
)

// PollResult is what one Poll did. A poll that did nothing (zero counts and
// not Done) lets the worker wait on its socket briefly instead of spinning.
type PollResult struct {
	// Samples and Batches count the work done, summed into the worker's stats.
	Samples int64
	Batches int64
	// Done moves the worker to COMPLETED: it has nothing more to do.
	Done bool
}

func (r PollResult) idle() bool { return r.Samples == 0 && r.Batches == 0 && !r.Done }

// Impl is what a worker type implements; the base owns the loop, the socket,
// the lifecycle and the name records.
type Impl interface {
	// Configure applies the type-specific configuration (the kwargs of the
	// "configure" command). An error moves the worker to ERROR.
	Configure(ctx context.Context, config rpc.Args) error
	// Poll does one bounded slice of work while RUNNING. An error moves the
	// worker to ERROR.
	Poll(ctx context.Context) (PollResult, error)
	// Stats are type-specific figures merged into the "stats" reply.
	Stats() map[string]any
	// Close releases the implementation's resources when the worker exits.
	Close() error
}

// Commander is implemented by worker types that answer commands beyond the
// standard ones. Their handlers run on the worker loop, between polls.
type Commander interface {
	Commands() map[string]rpc.Handler
}

// SocketOwner is implemented by worker types that read sockets of their
// own (inference and sample streams). An idle RUNNING worker then sleeps on
// those sockets and its request socket together, so new input wakes it at
// once; in other states only requests wake it. Sockets is asked again after
// every configure.
type SocketOwner interface {
	Sockets() []*zmq.Socket
}

// SocketSetter is implemented by a SocketOwner whose sockets change while
// it runs (a DQN trainer's replay client opens a socket per replay shard
// and closes it when the shard goes). SocketsVersion changes whenever
// Sockets would return another set; the loop asks it after every Poll and
// watches the new set before it waits again, so a socket that Poll closed
// is never waited on. Sockets may close a socket only in Poll, Configure
// or a command.
type SocketSetter interface {
	SocketsVersion() uint64
}

// FdWaiter is implemented by worker types that also take input through file
// descriptors that are not ZMQ sockets (a shared-memory channel's doorbell,
// which the peer writes a byte to when it publishes while this side
// sleeps). While RUNNING, an idle worker's wait also wakes when one of them
// is readable (or has an error or hang-up). The loop never reads them: Poll
// must drain what woke it, or every wait wakes at once. WaitFds is asked
// again whenever SocketOwner.Sockets is: after every configure and when
// the worker starts or stops running.
type FdWaiter interface {
	// WaitFds are the descriptors to watch for readability; negative ones
	// are left out, as nil sockets are from Sockets.
	WaitFds() []int
	// PrepareWait is called when the loop is about to wait with this worker
	// idle: it will not be polled again until a descriptor, socket, request
	// or deadline wakes it (its loop may still turn for other workers). It
	// tells the peers this side sleeps, so that they ring its doorbell, and
	// returns false when input is already there: the loop then polls the
	// worker at once instead of waiting.
	PrepareWait() bool
}

// MemoryWaiter is implemented by FdWaiters whose input arrives in memory
// they share with their peers (the shared-memory inference channels).
// InputReady reports whether input is waiting there, without a system call
// and without telling the peers that this side sleeps, and whether any
// peer is attached there at all: before it sleeps, the loop looks with it
// for a while (Options.SpinWait), so that a reply due in microseconds costs
// neither side the wake-up of a sleeping thread. A loop none of whose
// workers has a peer in memory does not look.
type MemoryWaiter interface {
	InputReady() (ready, peers bool)
}

// Deadliner is implemented by worker types with work due at a time of
// their own, not only when a socket has input (the replay worker answers a
// request the rate limiter held back when its deadline passes): an idle
// RUNNING worker then waits at most IdleFor (at least 1 ms).
type Deadliner interface {
	IdleFor() time.Duration
}

// Reporter is implemented by worker types that can be degraded without
// having failed: an actor whose policy worker stopped answering keeps
// running and retrying, and says so. A non-empty Warning goes into the
// status record; an empty one clears it.
//
// The worker shows a warning with hysteresis (Options.ConditionHold): one
// that comes and goes is logged once when it starts and once when it has
// been clear for the hold, not at every flip.
type Reporter interface {
	Warning() string
}

// Noter is implemented by worker types with something to say about their
// state that is not a fault: an actor back-pressured by a trainer that is
// the bound of the trial says how much of the last minute it waited. A
// non-empty Note goes into the status record (Status.Note), with the same
// hysteresis as a warning; the worker asks for it once a second, and its
// text is rewritten at most every 15 s.
type Noter interface {
	Note() string
}

// Info tells a Factory who the new worker is.
type Info struct {
	Name string // "{group}/{index}"
	Type string
	// Group is the worker's group in its experiment: its type unless the
	// experiment names several groups of one type.
	Group string
	Index int
	Trial names.Trial
	Host  string
	// TTL is the lease of the worker's address record; records the type
	// registers itself (stream endpoints) should live as long.
	TTL    time.Duration
	Repo   nameresolve.Repository
	Logger *slog.Logger
	// Curve is the trial's key pair when it runs with CURVE (nil: not):
	// every socket the type opens (stream, paramstream) must use it.
	Curve *rpc.CurveKeyPair
	// Metrics records the worker's Prometheus metrics (telemetry); the
	// type records its own figures through its part (Metrics.Actor(),
	// Metrics.Policy(), ...). nil outside a worker process: see Telemetry.
	Metrics *telemetry.Worker
}

// Telemetry returns i.Metrics, or a handle that records into a registry
// nothing serves if it is nil (a type made by a test without the base).
func (i Info) Telemetry() *telemetry.Worker {
	if i.Metrics == nil {
		return telemetry.Discard(telemetry.Identity{Experiment: i.Trial.Experiment, Trial: i.Trial.Trial, Type: i.Type, Index: i.Index, Group: i.Group})
	}
	return i.Metrics
}

// Log returns i.Logger, or slog.Default() if it is nil.
func (i Info) Log() *slog.Logger {
	if i.Logger == nil {
		return slog.Default()
	}
	return i.Logger
}

// Factory creates a worker type's implementation.
type Factory func(info Info) (Impl, error)
