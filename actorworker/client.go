package actorworker

import (
	"context"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
)

// InferenceClient is what an actor needs from an inference stream:
// stream.RemoteInferenceClient and stream.InlineInferenceClient satisfy it.
// It is used from the worker loop only.
type InferenceClient interface {
	// Post queues a request for obs (copied); it goes out at the next Flush.
	Post(obs []float32) (stream.ReqID, error)
	// Flush sends (or, inline, computes) everything posted since the last
	// Flush.
	Flush(ctx context.Context) error
	// Poll takes in the replies that have arrived without blocking.
	Poll() error
	// Ready reports whether a result or a failure is available for id.
	Ready(id stream.ReqID) bool
	// Consume takes the result for id; a failure wraps
	// stream.ErrInferenceFailed and the caller may post again.
	Consume(id stream.ReqID) (stream.InferenceResult, error)
	// Warning is "" when healthy, else what is wrong.
	Warning() string
	// Socket is readable when replies arrive; nil when there is none to
	// wait on (inline inference).
	Socket() *zmq.Socket
	Close() error
}

// SampleProducer is what an actor needs from a sample stream:
// stream.SampleProducer and stream.NullSampleProducer satisfy it.
type SampleProducer interface {
	// Post sends b without blocking. An error wrapping
	// stream.ErrBackpressure means b was not sent and may be posted again.
	//
	// Post must not retain b or its arrays once it returns (the stream's
	// producers encode the batch before returning): the agent reuses the
	// arrays of an accepted batch for its next one, which spares an
	// allocation per batch.
	Post(b *api.SampleBatch) error
	Warning() string
	Close() error
}

var (
	_ InferenceClient = (*stream.RemoteInferenceClient)(nil)
	_ InferenceClient = (*stream.InlineInferenceClient)(nil)
	_ SampleProducer  = (*stream.SampleProducer)(nil)
	_ SampleProducer  = (*stream.NullSampleProducer)(nil)
)
