package echoworker

import (
	"context"

	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/vmihailenco/msgpack/v5"
)

// TypeName is the worker type name ("echo/0", "echo/1", ...).
const TypeName = member.TypeEcho

// Worker is the echo worker type.
type Worker struct {
	config msgpack.RawMessage
	echoes int64
}

// New is the worker.Factory of the echo type.
func New(worker.Info) (worker.Impl, error) { return &Worker{}, nil }

// Type is the echo worker type, for a worker.Registry. It takes any
// configuration, so it has no check.
func Type() worker.Type { return worker.Type{Name: TypeName, New: New} }

// Configure keeps the configuration so that "config" can return it.
func (e *Worker) Configure(_ context.Context, config rpc.Args) error {
	if len(config.Raw()) > 0 {
		e.config = append(msgpack.RawMessage(nil), config.Raw()...)
	}
	return nil
}

// Poll has no work to do: the worker stays idle on its socket.
func (e *Worker) Poll(context.Context) (worker.PollResult, error) {
	return worker.PollResult{}, nil
}

// Stats reports how many echoes were answered.
func (e *Worker) Stats() map[string]any { return map[string]any{"echoes": e.echoes} }

// Close has nothing to release.
func (e *Worker) Close() error { return nil }

// Commands adds "echo" (returns its kwargs) and "config" (returns the last configuration).
func (e *Worker) Commands() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		"echo": func(_ context.Context, args rpc.Args) (any, error) {
			e.echoes++
			if len(args.Raw()) == 0 {
				return map[string]any{}, nil
			}
			return msgpack.RawMessage(append([]byte(nil), args.Raw()...)), nil
		},
		"config": func(context.Context, rpc.Args) (any, error) {
			if e.config == nil {
				return map[string]any{}, nil
			}
			return e.config, nil
		},
	}
}
