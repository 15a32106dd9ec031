package rpc

import (
	"errors"
	"fmt"
)

// Error type strings sent on the wire in {"error": {"type": ..., "message": ...}}.
// Handlers may use any other type string for their own failures; these are
// the ones the server itself produces.
const (
	// ErrTypeBadRequest: the payload is not msgpack, is not [string, map],
	// or arrived as more than one frame.
	ErrTypeBadRequest = "bad_request"
	// ErrTypeUnknownCommand: no handler is registered for the command.
	ErrTypeUnknownCommand = "unknown_command"
	// ErrTypeBadArguments: the kwargs did not decode into the handler's type.
	ErrTypeBadArguments = "bad_arguments"
	// ErrTypePayloadTooLarge: the payload exceeded ServerOptions.MaxPayload.
	ErrTypePayloadTooLarge = "payload_too_large"
	// ErrTypeHandlerPanic: the handler panicked; the server recovered.
	ErrTypeHandlerPanic = "handler_panic"
	// ErrTypeHandlerError: the handler returned a plain (non-*Error) error.
	ErrTypeHandlerError = "handler_error"
	// ErrTypeUnknownWorker: the request named a worker (its third element)
	// that this server does not serve, or named none where the server
	// serves several.
	ErrTypeUnknownWorker = "unknown_worker"
)

// Error is a typed error reply. Handlers return one to choose the wire type
// of their failure; a remote error comes back from Client.Request as *Error.
type Error struct {
	Type    string `msgpack:"type"`
	Message string `msgpack:"message"`
}

// Error returns "TYPE: MESSAGE".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// Is reports whether target is an *Error of the same Type, so that
// errors.Is(err, rpc.ErrUnknownCommand) matches any unknown_command reply
// whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && e != nil && t.Type == e.Type
}

// Errorf returns an *Error of type typ with a formatted message.
func Errorf(typ, format string, args ...any) *Error {
	return &Error{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is; only their Type is compared.
var (
	ErrBadRequest      = &Error{Type: ErrTypeBadRequest}
	ErrUnknownCommand  = &Error{Type: ErrTypeUnknownCommand}
	ErrBadArguments    = &Error{Type: ErrTypeBadArguments}
	ErrPayloadTooLarge = &Error{Type: ErrTypePayloadTooLarge}
	ErrHandlerPanic    = &Error{Type: ErrTypeHandlerPanic}
	ErrHandlerError    = &Error{Type: ErrTypeHandlerError}
	ErrUnknownWorker   = &Error{Type: ErrTypeUnknownWorker}
)

// ErrDuplicateCommand is returned by Mux.Handle for a command that
// already has a handler.
var ErrDuplicateCommand = errors.New("rpc: duplicate command")

// ErrClosed is returned by operations on a closed Server or Client.
var ErrClosed = errors.New("rpc: closed")
