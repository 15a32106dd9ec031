package controller

import (
	"context"
	"os"

	"github.com/distrl/distrl/experiment"
)

// WorkerSpec is one worker process for a Scheduler to run.
type WorkerSpec struct {
	Type  string
	Index int
	// Name is "{type}/{index}".
	Name string
	// Args are the flags of `rlctl worker` after --type and --index, which
	// the scheduler adds: name server, experiment, trial, TTL, host.
	Args []string
	// Env is added to the worker's environment (KEY=VALUE).
	Env []string
	// LogPath receives the worker's stdout and stderr, appended.
	LogPath string
	// Resources are what the worker asked for: a cluster scheduler turns
	// them into its resource requests; the local one ignores them.
	Resources experiment.Resources
}

// Handle is one started worker process (or, on a cluster, one job task).
type Handle interface {
	// PID is the process id where there is one on this machine; 0 otherwise.
	PID() int
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Wait blocks until the process has exited and returns how it ended
	// (nil for exit status 0).
	Wait() error
	// Signal delivers sig to the process (a cluster scheduler forwards it).
	Signal(sig os.Signal) error
	// Kill ends the process at once.
	Kill() error
}

// Scheduler starts worker processes. The local implementation runs them as
// child processes; a SLURM implementation would submit job array tasks and
// return handles that track them.
type Scheduler interface {
	// Start launches one worker and returns as soon as it is launched (not
	// registered): ctx bounds the launch only, not the worker's life.
	Start(ctx context.Context, spec WorkerSpec) (Handle, error)
	// StopAll ends every worker this scheduler started that is still
	// running: politely first (SIGTERM, which workers take as interrupt),
	// then by force when ctx ends. It returns once all have exited.
	StopAll(ctx context.Context) error
}

// GroupScheduler is a Scheduler that starts a whole worker group at once,
// as a SLURM job array does; the controller uses it when the scheduler has
// it. Start still starts one worker (a restart).
type GroupScheduler interface {
	Scheduler
	// StartGroup launches every worker of specs, all of one type, and
	// returns their handles in the order of specs.
	StartGroup(ctx context.Context, specs []WorkerSpec) ([]Handle, error)
}

// startGroup launches specs through the scheduler's StartGroup where it
// has one, else one by one.
func startGroup(ctx context.Context, s Scheduler, specs []WorkerSpec) ([]Handle, error) {
	if gs, ok := s.(GroupScheduler); ok {
		return gs.StartGroup(ctx, specs)
	}
	hs := make([]Handle, 0, len(specs))
	for _, spec := range specs {
		h, err := s.Start(ctx, spec)
		if err != nil {
			return hs, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// Queued is a Handle whose worker may wait in a queue before it runs (a
// cluster job). Time in the queue does not count against the controller's
// register timeout: a busy cluster is not a failed worker.
type Queued interface {
	// Queued reports whether the worker is still waiting to run, and why.
	Queued() (bool, string)
}

// queued lists the handles of names that are waiting in a queue, with why.
func queued(procs map[string]Handle, names []string) []string {
	var out []string
	for _, n := range names {
		if q, ok := procs[n].(Queued); ok {
			if yes, why := q.Queued(); yes {
				out = append(out, n+" ("+why+")")
			}
		}
	}
	return out
}
