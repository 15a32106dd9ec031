package rpc

import "context"

// Handler answers one command. The returned value is msgpack-encoded as the
// "ok" value of the reply (a msgpack.RawMessage passes through verbatim). An
// *Error return (possibly wrapped) picks the wire error type; any other error
// is sent as handler_error.
//
// ctx is the ctx given to Server.HandleRequests or Server.Serve.
type Handler func(ctx context.Context, args Args) (any, error)

// Typed adapts a function taking typed kwargs into a Handler. The kwargs
// decode into a fresh T (bad_arguments on failure); absent kwargs leave T
// zero.
func Typed[T any, R any](fn func(ctx context.Context, args T) (R, error)) Handler {
	return func(ctx context.Context, args Args) (any, error) {
		var in T
		if err := args.Decode(&in); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
}
