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
