package member

import (
	"context"

	"github.com/distrl/distrl/rpc"
)

// Standard commands every worker answers.
const (
	CmdPing      = "ping"
	CmdConfigure = "configure"
	CmdStart     = "start"
	CmdPause     = "pause"
	CmdExit      = "exit"
	CmdInterrupt = "interrupt"
	CmdStatus    = "status"
	CmdStats     = "stats"
)

// Commands are the standard commands of every member of a trial:
// ping, status, stats, exit and interrupt. The worker base answers them for
// each worker, and the controller for its "ctl" member. The functions run
// on the goroutine that serves the requests.
type Commands struct {
	// Status is the reply of "status".
	Status func() Status
	// Stats is the reply of "stats".
	Stats func() any
	// Stop ends the member in final (StateCompleted for "exit",
	// StateInterrupted for "interrupt") and returns the reply.
	Stop func(final State) Status
}

// Register installs the commands on mux.
func (m Commands) Register(mux *rpc.Mux) error {
	stop := func(final State) rpc.Handler {
		return func(context.Context, rpc.Args) (any, error) { return m.Stop(final), nil }
	}
	return mux.HandleAll(map[string]rpc.Handler{
		CmdPing:      func(context.Context, rpc.Args) (any, error) { return "pong", nil },
		CmdStatus:    func(context.Context, rpc.Args) (any, error) { return m.Status(), nil },
		CmdStats:     func(context.Context, rpc.Args) (any, error) { return m.Stats(), nil },
		CmdExit:      stop(StateCompleted),
		CmdInterrupt: stop(StateInterrupted),
	})
}

// Spec is what a worker type tells the controller that plans a trial of
// its workers (worker.Type carries one).
type Spec struct {
	// Check decodes and checks the configure kwargs of worker index as the
	// type's Configure does, without opening sockets or files, so that a
	// bad configuration is refused before anything starts. Its error is a
	// bad_arguments *rpc.Error saying which key and what is allowed. nil:
	// the type's workers check their configuration when configured.
	Check func(args rpc.Args, index int) error
	// CheckpointDir, where set, is the directory worker index of group
	// keeps its checkpoints in, under base, the trial's checkpoint
	// directory; the controller passes it as the worker's checkpoint_dir
	// unless the configuration names one.
	CheckpointDir func(base, group string, index int) string
	// Grouped types' workers learn as one data-parallel group (package
	// collective): the controller passes each worker the group's count as
	// its group_size unless the configuration gives one.
	Grouped bool
}

// GroupSizeKey is the configure kwarg through which a Grouped type's
// worker learns its group's size.
const GroupSizeKey = "group_size"
