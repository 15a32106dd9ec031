package trainerworker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// Algorithms a trainer runs: the "algorithm" key of its configuration.
const (
	// AlgoPPO (the default): on-policy PPO on batches from a sample stream.
	AlgoPPO = "ppo"
	// AlgoDQN: off-policy DQN on batches sampled from a replay stream,
	// priorities sent back (Ape-X's learner).
	AlgoDQN = "dqn"
)

// algorithm is one trainer algorithm, a worker.Impl of its own.
type algorithm interface {
	worker.Impl
	worker.SocketOwner
	worker.Reporter
	// overlaps says updates run beside the loop (on a job).
	overlaps() bool
}

// Worker is the trainer worker type: the seam between the worker and the
// algorithm its configuration names. Its methods run on the worker's loop.
type Worker struct {
	info    worker.Info
	engines Engines
	name    string
	algo    algorithm
	// metrics is the trainer's part, fetched once: the algorithms that
	// replace each other record into the same series.
	metrics *telemetry.Trainer
	// busy is the learner's and the loop's busy time, which the
	// algorithms account their updates in.
	busy *busyClock
}

var (
	_ worker.Impl         = (*Worker)(nil)
	_ worker.SocketOwner  = (*Worker)(nil)
	_ worker.Reporter     = (*Worker)(nil)
	_ worker.Deadliner    = (*Worker)(nil)
	_ worker.SocketSetter = (*Worker)(nil)
	_ worker.Noter        = (*Worker)(nil)
	_ worker.FdWaiter     = (*Worker)(nil)
)

// Engines are the accelerators a binary can train on, by kind (the "cuda"
// of "cuda:0"): each opens a learner's engine on the device of an ordinal.
type Engines map[string]func(ordinal int) nn.OpenEngine

// New is the worker.Factory of the trainer type on the CPU alone.
func New(info worker.Info) (worker.Impl, error) { return NewFactory(nil)(info) }

// NewFactory is the worker.Factory of the trainer type with engines
// besides the CPU.
func NewFactory(engines Engines) worker.Factory {
	return func(info worker.Info) (worker.Impl, error) {
		m := info.Telemetry().Trainer()
		return &Worker{info: info, engines: engines, metrics: m, busy: newBusyClock(m)}, nil
	}
}

// Type is the trainer worker type on the CPU alone (NewType(nil)).
func Type() worker.Type { return NewType(nil) }

// NewType is the trainer worker type, for a worker.Registry, whose
// learners may also run on engines (nil: the CPU alone): a trainer keeps
// its checkpoints in the trial's checkpoint directory, or, in a group
// named otherwise than its type (one of several policies' trainers), in
// a directory of the group's name under it.
func NewType(engines Engines) worker.Type {
	return worker.Type{Name: TypeName, New: NewFactory(engines), Spec: member.Spec{Check: CheckConfig,
		CheckpointDir: func(base, group string, _ int) string {
			if group == TypeName {
				return base
			}
			return filepath.Join(base, group)
		}, Grouped: true}}
}

// CheckConfig checks a trainer's configure kwargs, either algorithm's, as
// Configure does, opening nothing but what reading the environment's
// spaces takes (worker.Type.Check).
func CheckConfig(args rpc.Args, index int) error {
	name, err := algorithmOf(args)
	if err != nil {
		return err
	}
	if name == AlgoDQN {
		_, _, _, err = parseDQNConfig(args, index)
		return err
	}
	_, err = parseConfig(args, index)
	return err
}

// algorithmOf reads the "algorithm" key of the kwargs (default ppo).
func algorithmOf(args rpc.Args) (string, error) {
	raw := args.Raw()
	if len(raw) == 0 || raw[0] == 0xc0 {
		return AlgoPPO, nil
	}
	var m map[string]msgpack.RawMessage
	if err := msgpack.NewDecoder(bytes.NewReader(raw)).Decode(&m); err != nil {
		return "", rpc.Errorf(rpc.ErrTypeBadArguments, "trainer config: %v", err)
	}
	v, ok := m["algorithm"]
	if !ok {
		return AlgoPPO, nil
	}
	var name string
	if err := msgpack.Unmarshal(v, &name); err != nil || (name != AlgoPPO && name != AlgoDQN) {
		return "", rpc.Errorf(rpc.ErrTypeBadArguments, "trainer config: algorithm %s: want %q or %q", v, AlgoPPO, AlgoDQN)
	}
	return name, nil
}

// Configure configures the named algorithm. The same algorithm is
// reconfigured in place; another one replaces it (the old one closed
// first: both would publish the same policy).
func (w *Worker) Configure(ctx context.Context, args rpc.Args) error {
	name, err := algorithmOf(args)
	if err != nil {
		return err
	}
	if w.algo != nil && name != w.name {
		if err := w.algo.Close(); err != nil {
			w.info.Log().Warn("trainer: closing the previous algorithm", "algorithm", w.name, "err", err)
		}
		w.algo = nil
	}
	if w.algo == nil {
		switch name {
		case AlgoDQN:
			w.algo = newDQN(w.info, w.metrics, w.engines, w.busy)
		default:
			w.algo = newPPO(w.info, w.metrics, w.engines, w.busy)
		}
		w.name = name
	}
	return w.algo.Configure(ctx, args)
}

var errNotConfigured = errors.New("trainer: not configured")

// Poll runs the algorithm, and accounts its time outside updates.
func (w *Worker) Poll(ctx context.Context) (worker.PollResult, error) {
	if w.algo == nil {
		return worker.PollResult{}, errNotConfigured
	}
	begin, onLoop := time.Now(), w.busy.onLoop
	res, err := w.algo.Poll(ctx)
	w.busy.polled(begin, time.Now(), w.busy.onLoop-onLoop)
	return res, err
}

// Stats are the algorithm's, with its name.
func (w *Worker) Stats() map[string]any {
	if w.algo == nil {
		return map[string]any{}
	}
	s := w.algo.Stats()
	s["algorithm"] = w.name
	w.busy.stats(s, time.Now())
	return s
}

// Sockets are the algorithm's.
func (w *Worker) Sockets() []*zmq.Socket {
	if w.algo == nil {
		return nil
	}
	return w.algo.Sockets()
}

// Warning is the algorithm's.
func (w *Worker) Warning() string {
	if w.algo == nil {
		return ""
	}
	return w.algo.Warning()
}

// WaitFds and PrepareWait are the algorithm's, if it waits on more than
// sockets (a group's member at the barrier, on its shared-memory
// doorbell).
func (w *Worker) WaitFds() []int {
	if f, ok := w.algo.(worker.FdWaiter); ok {
		return f.WaitFds()
	}
	return nil
}

func (w *Worker) PrepareWait() bool {
	if f, ok := w.algo.(worker.FdWaiter); ok {
		return f.PrepareWait()
	}
	return true
}

// Note says whether the trainer is the trial's bound (busyClock.note),
// and the algorithm's, if it has one (a group's member says where it
// stands in its group).
func (w *Worker) Note() string {
	if w.algo == nil {
		return ""
	}
	var notes []string
	if n := w.busy.note(time.Now(), w.algo.overlaps()); n != "" {
		notes = append(notes, n)
	}
	if n, ok := w.algo.(worker.Noter); ok {
		if s := n.Note(); s != "" {
			notes = append(notes, s)
		}
	}
	return strings.Join(notes, "; ")
}

// SocketsVersion is the algorithm's if its sockets change as it runs (a
// new algorithm's sockets are watched anyway: configure rewatches).
func (w *Worker) SocketsVersion() uint64 {
	if s, ok := w.algo.(worker.SocketSetter); ok {
		return s.SocketsVersion()
	}
	return 0
}

// IdleFor is the algorithm's if it has deadlines of its own.
func (w *Worker) IdleFor() time.Duration {
	if d, ok := w.algo.(worker.Deadliner); ok {
		return d.IdleFor()
	}
	return time.Hour
}

// Close closes the algorithm.
func (w *Worker) Close() error {
	if w.algo == nil {
		return nil
	}
	if err := w.algo.Close(); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	return nil
}
