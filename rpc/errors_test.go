package rpc

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Type: "bad_request", Message: "not msgpack"}, "bad_request: not msgpack"},
		{&Error{Type: "bad_request"}, "bad_request"},
		{Errorf("x", "n=%d", 3), "x: n=3"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorIs(t *testing.T) {
	unknown := Errorf(ErrTypeUnknownCommand, "unknown command %q", "x")
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same type", unknown, ErrUnknownCommand, true},
		{"wrapped", fmt.Errorf("call: %w", unknown), ErrUnknownCommand, true},
		{"other type", unknown, ErrBadRequest, false},
		{"custom type", Errorf("not_ready", "x"), &Error{Type: "not_ready"}, true},
		{"plain target", unknown, errors.New("unknown_command"), false},
		{"nil target", unknown, (*Error)(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWireError(t *testing.T) {
	custom := Errorf("not_ready", "later")
	tests := []struct {
		name string
		err  error
		want Error
	}{
		{"plain", errors.New("boom"), Error{ErrTypeHandlerError, "boom"}},
		{"typed", custom, Error{"not_ready", "later"}},
		{"wrapped typed", fmt.Errorf("load: %w", custom), Error{"not_ready", "load: not_ready: later"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wireError(tt.err); *got != tt.want {
				t.Errorf("wireError = %+v, want %+v", *got, tt.want)
			}
		})
	}
}
