package controller

import (
	"errors"
	"fmt"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/member"
	"github.com/vmihailenco/msgpack/v5"
)

// WorkerTypes finds a worker type's description by name: what the
// controller knows of a type (its configuration check, its checkpoint
// directory) comes from there, never from the type's name.
// *worker.Registry is one.
type WorkerTypes interface {
	Spec(name string) (member.Spec, bool)
}

// The bounds of a trial, checked before anything starts (CheckWorkers):
// past them a controller would spend its memory planning rather than fail
// in a line. 4096 processes is twice what a 16-core machine with 128 GiB
// runs (each is a Go runtime with its ZeroMQ threads); hosted workers
// (per_process) reach MaxWorkers in a few hundred processes.
const (
	MaxWorkers   = 65536
	MaxProcesses = 4096
)

// WorkerConfigError is a worker's configuration refused before the trial
// started: by its type's check, or a count past the bounds.
type WorkerConfigError struct {
	Field  string // "workers.actor.config", "workers.actor.count"
	Worker string // the worker whose configuration failed, or ""
	Err    error
}

func (e *WorkerConfigError) Error() string {
	msg := e.Err.Error()
	if re, ok := errors.AsType[*rpc.Error](e.Err); ok {
		msg = re.Message // a check's bad_arguments: the type is the field's
	}
	if e.Worker == "" {
		return e.Field + ": " + msg
	}
	return fmt.Sprintf("%s (%s): %s", e.Field, e.Worker, msg)
}

func (e *WorkerConfigError) Unwrap() error { return e.Err }

// workerKwargs is the configure kwargs of worker index of group: the
// experiment's, with the checkpoint directory under checkpoints where the
// type keeps checkpoints and the configuration names none, and the
// group's size where the type's workers form a group.
func workerKwargs(cfg *experiment.Config, types WorkerTypes, group string, index int, checkpoints string) map[string]any {
	kw := cfg.WorkerConfig(group, index)
	if types == nil {
		return kw
	}
	t, ok := types.Spec(cfg.TypeOf(group))
	if !ok {
		return kw
	}
	if _, given := kw["checkpoint_dir"]; !given && t.CheckpointDir != nil {
		kw["checkpoint_dir"] = t.CheckpointDir(checkpoints, group, index)
	}
	if _, given := kw[member.GroupSizeKey]; !given && t.Grouped {
		kw[member.GroupSizeKey] = cfg.Workers[group].N()
	}
	return kw
}

// CheckWorkers refuses, before anything starts, a trial whose counts pass
// MaxWorkers or MaxProcesses, or one of whose worker configurations its
// type's check refuses: the first and the last worker of each group (the
// configuration may depend on the index) are checked as they would be
// configured. cfg is validated, its counts resolved (ResolveCounts), and
// every type in types. The error is a *WorkerConfigError.
func CheckWorkers(cfg *experiment.Config, types WorkerTypes, checkpoints string) error {
	if err := checkBounds(cfg); err != nil {
		return err
	}
	for _, group := range cfg.Groups() {
		t, ok := types.Spec(cfg.TypeOf(group))
		if !ok {
			continue
		}
		g := cfg.Workers[group]
		if host, ok := cfg.Workers[g.Colocate]; ok && usesCUDA(g) && !usesCUDA(host) {
			// Its workers run in the host's binary, rlctl, not rlctl-cuda.
			return &WorkerConfigError{Field: "workers." + group + ".colocate",
				Err: fmt.Errorf("%s: %s is on a CUDA device and %s on the CPU; a colocated group runs in its host's processes, so put both on CUDA or neither", g.Colocate, group, g.Colocate)}
		}
		if t.Grouped && g.N() > 1 && (g.WorkersPerProcess() > 1 || g.Colocate != "") {
			// Members wait for each other inside an update: two on one
			// loop would wait for ever, each for the other's turn.
			return &WorkerConfigError{Field: "workers." + group + ".per_process",
				Err: fmt.Errorf("%d: the %d %s workers learn as one group, whose members each need a process (a loop) of their own; leave per_process and colocate out", g.PerProcess, g.N(), group)}
		}
		if t.Check == nil {
			continue
		}
		n := g.N()
		for _, index := range []int{0, n - 1}[:min(n, 2)] { // none, the one, or the first and the last
			raw, err := msgpack.Marshal(workerKwargs(cfg, types, group, index, checkpoints))
			if err == nil {
				err = t.Check(rpc.RawArgs(raw), index)
			}
			if err != nil {
				return &WorkerConfigError{Field: "workers." + group + ".config", Worker: names.WorkerName(group, index), Err: err}
			}
		}
	}
	return nil
}

// checkBounds refuses counts past MaxWorkers or MaxProcesses.
func checkBounds(cfg *experiment.Config) error {
	workers, procs := 0, 0
	for _, group := range cfg.Groups() {
		g := cfg.Workers[group]
		workers += g.N()
		procs += g.Processes()
		if workers > MaxWorkers || procs > MaxProcesses {
			field := group
			if _, ok := cfg.Workers[g.Colocate]; ok {
				field = g.Colocate // its count follows its host's
			}
			return &WorkerConfigError{Field: "workers." + field + ".count",
				Err: fmt.Errorf("%v: the trial would have %d or more workers in %d or more processes; at most %d workers in %d processes (per_process hosts several in one)",
					g.Count, workers, procs, MaxWorkers, MaxProcesses)}
		}
	}
	return nil
}
