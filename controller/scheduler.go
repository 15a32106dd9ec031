package controller

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
)

// WorkerSpec is one worker process for a Scheduler to run. It hosts the
// workers Group/Index .. Group/Index+Count-1 (`rlctl worker --count`).
type WorkerSpec struct {
	Type string
	// Group is the experiment's group the workers are of; "" is Type.
	Group string
	Index int
	// Count is how many workers the process hosts; 0 counts as 1.
	Count int
	// PerProcess is the group's per_process (0 counts as 1): the group's
	// k-th process hosts the indices from k*PerProcess, so a scheduler
	// that starts a group as one array finds a process's task from it.
	PerProcess int
	// Name names the process: "{group}/{index}" for a process of one
	// worker, "{group}/{first}-{last}" for a host of many.
	Name string
	// With are the workers of other groups it hosts besides, each the
	// worker of the process's own index in its group (a group's colocate:
	// `rlctl worker --with`); Args carries their flags.
	With []Companion
	// Workers are the names of the workers it hosts, by index, then those
	// of With.
	Workers []string
	// Args are the flags of `rlctl worker` after --type, --index and
	// --count, which the scheduler adds: name server, experiment, trial,
	// TTL, host.
	Args []string
	// Env is added to the worker's environment (KEY=VALUE).
	Env []string
	// Executable is the binary to run, "" for the scheduler's own (rlctl):
	// groups on a CUDA device run Options.CUDABinary.
	Executable string
	// LogPath receives the process's stdout and stderr, appended.
	LogPath string
	// Resources are what the process asked for: a cluster scheduler turns
	// them into its resource requests; the local one ignores them.
	Resources experiment.Resources
}

// Companion is a worker of another group that a process hosts besides
// its own: GROUP/INDEX, of type Type, INDEX the process's.
type Companion struct {
	Group, Type string
}

// arg is the companion as `rlctl worker --with` takes it: GROUP, or
// GROUP=TYPE where the group is not named after its type.
func (c Companion) arg() string {
	if c.Group == c.Type {
		return c.Group
	}
	return c.Group + "=" + c.Type
}

// HostedWorker is one worker of a process: its name, group, type and index.
type HostedWorker struct {
	Name, Group, Type string
	Index             int
}

// Members are the workers the process hosts, in the order of Workers.
func (s WorkerSpec) Members() []HostedWorker {
	out := make([]HostedWorker, 0, len(s.Workers))
	for i, name := range s.Workers {
		w := HostedWorker{Name: name, Group: s.GroupName(), Type: s.Type, Index: s.Index + i}
		if k := i - s.Hosts(); k >= 0 {
			w.Group, w.Type, w.Index = s.With[k].Group, s.With[k].Type, s.Index
		}
		out = append(out, w)
	}
	return out
}

// GroupName is the group of the process's workers: Group, or Type.
func (s WorkerSpec) GroupName() string { return cmp.Or(s.Group, s.Type) }

// TypeArgs are the flags of `rlctl worker` that say what the process runs:
// --type, and --group where the group is not named after its type.
func (s WorkerSpec) TypeArgs() []string {
	if s.GroupName() == s.Type {
		return []string{"--type", s.Type}
	}
	return []string{"--type", s.Type, "--group", s.Group}
}

// hosts is how many workers the process hosts.
func (s WorkerSpec) Hosts() int { return max(s.Count, 1) }

// task is the process's position in its group: its index in a job array.
func (s WorkerSpec) Task() int { return s.Index / max(s.PerProcess, 1) }

// hostedName names a process of group hosting count workers from first:
// the worker's own name for a group of a process per worker, else
// "{group}/{first}-{last}" (whose log is logs/{group}-{first}-{last}.log).
func hostedName(group string, first, count, perProcess int) string {
	if perProcess <= 1 {
		return names.WorkerName(group, first)
	}
	return fmt.Sprintf("%s/%d-%d", group, first, first+count-1)
}

// ProcessSpecs are the processes of group g, named group, of type typ:
// one per worker, or per_process workers each with the remainder in the
// last; each process also hosts the worker of its index of each group of
// with (whose colocate names group: then per_process is 1).
func ProcessSpecs(group, typ string, g experiment.Group, dir TrialDir, args, env []string, exe string, with ...Companion) []WorkerSpec {
	per := g.WorkersPerProcess()
	if len(with) > 0 {
		args = slices.Clone(args)
		for _, c := range with {
			args = append(args, "--with", c.arg())
		}
	}
	var out []WorkerSpec
	for first := 0; first < g.N(); first += per {
		n := min(per, g.N()-first)
		ws := make([]string, n, n+len(with))
		for i := range ws {
			ws[i] = names.WorkerName(group, first+i)
		}
		for _, c := range with {
			ws = append(ws, names.WorkerName(c.Group, first))
		}
		name := hostedName(group, first, n, per)
		spec := WorkerSpec{Type: typ, Index: first, Count: n, PerProcess: per, Name: name, With: with, Workers: ws,
			Args: args, Env: env, Executable: exe, LogPath: dir.Log(name), Resources: g.Resources}
		if group != typ {
			spec.Group = group
		}
		out = append(out, spec)
	}
	return out
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
// child processes; the SLURM one submits job array tasks and returns
// handles that track them.
type Scheduler interface {
	// Start launches one worker process and returns as soon as it is
	// launched (not registered): ctx bounds the launch only, not its life.
	Start(ctx context.Context, spec WorkerSpec) (Handle, error)
	// StopAll ends every worker this scheduler started that is still
	// running: politely first (SIGTERM, which workers take as interrupt),
	// then by force when ctx ends. It returns once all have exited.
	StopAll(ctx context.Context) error
}

// GroupScheduler is a Scheduler that starts a whole worker group at once,
// as a SLURM job array does; the controller uses it when the scheduler has
// it. Start still starts one process (a restart).
type GroupScheduler interface {
	Scheduler
	// StartGroup launches every process of specs, one group's in order
	// (ProcessSpecs), and returns their handles in the order of specs.
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

// queued lists the processes of procs that wait in a queue, with why, and
// counts the workers they host.
func queued(procs []launched) (lines []string, workers int) {
	for _, p := range procs {
		if q, ok := p.handle.(Queued); ok {
			if yes, why := q.Queued(); yes {
				lines = append(lines, p.spec.Name+" ("+why+")")
				workers += p.spec.Hosts()
			}
		}
	}
	return lines, workers
}
