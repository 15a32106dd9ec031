package stream

import (
	"errors"

	"github.com/distrl/distrl/internal/endpoint"
)

var (
	// ErrInferenceFailed is wrapped by the error Consume returns for a
	// request that got no answer: no reply within the timeout (the policy
	// worker died or is overloaded), or, for the inline client, a policy
	// error. The request is gone; the caller may post the observation again.
	ErrInferenceFailed = errors.New("stream: inference failed")

	// ErrInferenceRefused is wrapped by the error Consume returns for a
	// request a policy worker refused, with its reason: the observation
	// does not fit the policy (a configuration mismatch, such as
	// frame_stack given to the actors but not to the policy workers).
	// Posting it again would be refused again.
	ErrInferenceRefused = errors.New("stream: inference refused")

	// ErrBackpressure is returned by SampleProducer.Post when every
	// consumer's queue is full or no consumer is known. The batch was not
	// sent; the caller keeps it and posts it again later.
	ErrBackpressure = errors.New("stream: back-pressure: no sample consumer has room, batch not sent")

	// ErrUnknownRequest is returned by Consume for an id that was never
	// posted or was already consumed.
	ErrUnknownRequest = errors.New("stream: unknown inference request")

	// ErrTooLarge is returned when a message would exceed the size limit
	// that its receiver enforces; ZMQ would drop the connection instead of
	// delivering it.
	ErrTooLarge = errors.New("stream: message too large")

	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("stream: closed")
)

// Defaults of the bound side of the streams (package internal/endpoint's).
const (
	DefaultHost       = endpoint.DefaultHost
	DefaultTTL        = endpoint.DefaultTTL
	DefaultMaxMsgSize = endpoint.DefaultMaxMsgSize
)
