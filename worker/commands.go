package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/member"
)

// counters are the base figures of the "stats" reply.
type counters struct {
	start        time.Time
	stateChanged time.Time
	polls        int64
	samples      int64
	batches      int64
	pollTime     time.Duration
	// spunWaits are the waits that input in shared memory ended while the
	// loop looked for it, before it slept (MemoryWaiter).
	spunWaits int64
}

// commands fills mux, the worker's command table: the member commands, the
// lifecycle commands and the type's own.
func (w *Worker) commands(mux *rpc.Mux) error {
	std := member.Commands{
		Status: w.currentStatus,
		Stats:  func() any { return w.statsReply() },
		Stop: func(final member.State) member.Status {
			w.exit(final)
			return w.exitStatus()
		},
	}
	if err := std.Register(mux); err != nil {
		return fmt.Errorf("worker %s: %w", w.name, err)
	}
	if err := mux.HandleAll(map[string]rpc.Handler{
		member.CmdConfigure: w.handleConfigure,
		member.CmdStart:     w.transition(member.StateRunning, member.StateConfigured, member.StatePaused),
		member.CmdPause:     w.transition(member.StatePaused, member.StateRunning),
	}); err != nil {
		return fmt.Errorf("worker %s: %w", w.name, err)
	}
	c, ok := w.impl.(Commander)
	if !ok {
		return nil
	}
	for cmd, h := range c.Commands() {
		if err := mux.Handle(cmd, w.guard(h)); err != nil {
			return fmt.Errorf("worker %s: type %s command %q: %w", w.name, w.opts.Type, cmd, err)
		}
	}
	return nil
}

func (w *Worker) exitStatus() member.Status {
	s := w.currentStatus()
	s.State = w.exitState
	return s
}

func (w *Worker) handleConfigure(ctx context.Context, args rpc.Args) (any, error) {
	if err := w.allowed(member.CmdConfigure, member.StateReady, member.StateConfigured); err != nil {
		return nil, err
	}
	// Configure may have replaced the type's sockets, even when it failed
	// part-way: watch them again (not here: the server is busy answering).
	w.rewatch = true
	if err := w.impl.Configure(ctx, args); err != nil {
		if callerFault(err) {
			return nil, err // a bad config can be fixed and sent again
		}
		w.fail(fmt.Errorf("configure: %w", err))
		return nil, err
	}
	w.setState(member.StateConfigured)
	return w.currentStatus(), nil
}

// transition is a command that moves the worker to `to` from one of `from`.
func (w *Worker) transition(to member.State, from ...member.State) rpc.Handler {
	cmd := map[member.State]string{member.StateRunning: member.CmdStart, member.StatePaused: member.CmdPause}[to]
	return func(ctx context.Context, _ rpc.Args) (any, error) {
		if err := w.allowed(cmd, from...); err != nil {
			return nil, err
		}
		w.setState(to)
		return w.currentStatus(), nil
	}
}

func (w *Worker) allowed(cmd string, from ...member.State) error {
	if w.exiting {
		return rpc.Errorf(ErrTypeBadState, "%s: worker %s is exiting", cmd, w.name)
	}
	if !slices.Contains(from, w.state) {
		return rpc.Errorf(ErrTypeBadState, "%s: worker %s is %s; allowed from %v", cmd, w.name, w.state, from)
	}
	return nil
}

// guard wraps a worker type's handler: a failure of the worker itself (an
// error that is not the caller's fault, or a panic) moves it to ERROR.
func (w *Worker) guard(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, args rpc.Args) (reply any, err error) {
		defer func() {
			if r := recover(); r != nil {
				w.log.Error("handler panicked", "panic", r, "stack", string(debug.Stack()))
				err = rpc.Errorf(rpc.ErrTypeHandlerPanic, "%v", r)
				w.fail(err)
			}
		}()
		reply, err = h(ctx, args)
		if err != nil && !callerFault(err) {
			w.fail(err)
		}
		return reply, err
	}
}

// callerFault reports whether err is the requester's doing rather than the worker's.
func callerFault(err error) bool {
	var re *rpc.Error
	if !errors.As(err, &re) {
		return false
	}
	switch re.Type {
	case rpc.ErrTypeBadRequest, rpc.ErrTypeUnknownCommand, rpc.ErrTypeBadArguments,
		rpc.ErrTypePayloadTooLarge, ErrTypeBadState:
		return true
	}
	return false
}

func (w *Worker) statsReply() map[string]any {
	up := time.Since(w.stats.start).Seconds()
	out := map[string]any{
		"uptime_s":       up,
		"polls":          w.stats.polls,
		"samples":        w.stats.samples,
		"batches":        w.stats.batches,
		"requests":       w.mux.Served(),
		"poll_busy_frac": w.stats.pollTime.Seconds() / max(up, 1e-9),
		"samples_per_s":  float64(w.stats.samples) / max(up, 1e-9),
		"spun_waits":     w.stats.spunWaits,
		// The process's goroutines: a leak shows as a count that climbs.
		"goroutines": runtime.NumGoroutine(),
	}
	// The type's own figures win over the base's generic counters of the
	// same name: it knows what its samples and batches are.
	for k, v := range w.impl.Stats() {
		out[k] = v
	}
	out["name"] = w.name
	out["state"] = string(w.state)
	return out
}
