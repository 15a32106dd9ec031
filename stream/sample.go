package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Defaults of the sample stream.
const (
	DefaultStream  = "default"
	DefaultSendHWM = 64
	DefaultRecvHWM = 64
	// producerLinger is how long Close waits for queued batches to reach
	// a consumer: long enough to drain on a graceful stop, short enough not
	// to hang on a consumer that is gone.
	producerLinger = 2 * time.Second
)

// SamplePoster is what an actor needs from a sample stream; *SampleProducer
// and *NullSampleProducer implement it.
type SamplePoster interface {
	// Post sends b or returns ErrBackpressure; it never blocks.
	//
	// Post must not retain b or its arrays once it returns (the stream's
	// producers encode the batch before returning): an actor reuses the
	// arrays of an accepted batch for its next one, which spares an
	// allocation per batch.
	Post(b *api.SampleBatch) error
	Warning() string
	Close() error
}

var (
	_ SamplePoster = (*SampleProducer)(nil)
	_ SamplePoster = (*NullSampleProducer)(nil)
)

// SampleProducerOptions configure a SampleProducer.
type SampleProducerOptions struct {
	Repo   nameresolve.Repository
	Trial  names.Trial
	Stream string // default "default"
	// SendHWM is how many batches may wait in the producer per consumer;
	// default 64.
	SendHWM int
	// MaxMsgSize is the largest encoded batch Post sends; it must not
	// exceed the consumers' MaxMsgSize. Default 64 MiB.
	MaxMsgSize int64
	Logger     *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// SampleProducerStats are a producer's counters since it was created.
type SampleProducerStats struct {
	Posted       int64 // batches sent
	Steps        int64 // steps in the batches sent
	Bytes        int64 // encoded bytes sent
	Backpressure int64 // Posts that returned ErrBackpressure
}

// SampleProducer sends SampleBatches to the consumers of one sample stream.
// It is for one goroutine.
//
// Back-pressure contract: the queues between an actor and the trainers are
// bounded, SendHWM batches per consumer here plus RecvHWM in each consumer.
// When all of them are full, or no consumer is registered, Post returns
// ErrBackpressure without sending; the caller keeps the batch, stops
// stepping its environments, and posts the same batch again (after polling
// its sockets) until it goes out. No batch is dropped or duplicated.
type SampleProducer struct {
	opts    SampleProducerOptions
	log     *slog.Logger
	sock    *zmq.Socket
	peers   *peerSet
	enc     *encoder
	blocked sendBlock // why the last Post did not send
	peerN   int
	stats   SampleProducerStats
	closed  bool
}

// NewSampleProducer creates a producer connected to every consumer of
// opts.Stream, and to those that register later. ctx bounds the initial
// name-resolve lookup.
func NewSampleProducer(ctx context.Context, opts SampleProducerOptions) (*SampleProducer, error) {
	opts.Stream = cmp.Or(opts.Stream, DefaultStream)
	opts.SendHWM = cmp.Or(opts.SendHWM, DefaultSendHWM)
	opts.MaxMsgSize = cmp.Or(opts.MaxMsgSize, DefaultMaxMsgSize)
	log := zsock.LoggerOr(opts.Logger).With("stream", opts.Stream)
	switch {
	case opts.Repo == nil:
		return nil, errors.New("stream: SampleProducerOptions.Repo is required")
	case opts.SendHWM < 0 || opts.MaxMsgSize < 0:
		return nil, fmt.Errorf("stream: invalid SampleProducerOptions (SendHWM %d, MaxMsgSize %d)", opts.SendHWM, opts.MaxMsgSize)
	}
	// LINGER: batches already queued are real work; give them time to
	// drain on a graceful Close.
	so := connectingOptions(producerLinger, opts.Curve)
	so.SendHWM = opts.SendHWM
	sock, err := zsock.New(zmq.PUSH, so)
	if err != nil {
		return nil, fmt.Errorf("stream: sample producer: %w", err)
	}
	peers, err := newPeerSet(ctx, opts.Repo, opts.Trial.StreamPrefix("sample", opts.Stream), sock, log)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("stream: sample producer: %w", err)
	}
	return &SampleProducer{opts: opts, log: log, sock: sock, peers: peers, enc: newEncoder()}, nil
}

// Post validates and sends b to a consumer that has room. It never blocks:
// with no room anywhere it returns ErrBackpressure and b was not sent (see
// the type's documentation). An invalid batch or one over MaxMsgSize is an
// error (wrapping ErrTooLarge for the latter); retrying it cannot help.
func (p *SampleProducer) Post(b *api.SampleBatch) error {
	if p.closed {
		return ErrClosed
	}
	p.peerN = p.peers.sync()
	if p.peerN == 0 {
		return p.backpressure(sendNoWorker)
	}
	// Encoding is the expensive part; while back-pressured (an actor
	// retries every poll) skip it until a pipe has room.
	if stillNoRoom(p.sock, p.blocked) {
		return p.backpressure(sendNoRoom)
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("stream: Post: %w", err)
	}
	e := p.enc.reset()
	if err := e.Encode(b); err != nil {
		return fmt.Errorf("stream: encode sample batch: %w", err)
	}
	size := p.enc.buf.Len()
	if int64(size) > p.opts.MaxMsgSize {
		return fmt.Errorf("stream: Post: batch of %d steps encodes to %d bytes: %w (limit %d)", b.Len(), size, ErrTooLarge, p.opts.MaxMsgSize)
	}
	if _, err := p.sock.SendBytes(p.enc.buf.Bytes(), zmq.DONTWAIT); err != nil {
		if zsock.IsEAGAIN(err) {
			return p.backpressure(sendNoRoom)
		}
		return fmt.Errorf("stream: send sample batch: %w", err)
	}
	p.blocked = sendOK
	p.stats.Posted++
	p.stats.Steps += int64(b.Len())
	p.stats.Bytes += int64(size)
	return nil
}

func (p *SampleProducer) backpressure(why sendBlock) error {
	p.blocked = why
	p.stats.Backpressure++
	return ErrBackpressure
}

// Warning says why the last Post did not send; "" once a batch goes out.
func (p *SampleProducer) Warning() string {
	switch p.blocked {
	case sendNoWorker:
		return fmt.Sprintf("no sample consumer for stream %q", p.opts.Stream)
	case sendNoRoom:
		return fmt.Sprintf("back-pressure: the %d consumer(s) of sample stream %q have no room", p.peerN, p.opts.Stream)
	}
	return ""
}

// Stats returns the producer's counters.
func (p *SampleProducer) Stats() SampleProducerStats { return p.stats }

// Socket is the PUSH socket; it is writable when a consumer has room, so a
// back-pressured actor can wait on it.
func (p *SampleProducer) Socket() *zmq.Socket { return p.sock }

// Close stops following name resolve and closes the socket, giving queued
// batches up to 2 s to reach their consumers. Close is idempotent.
func (p *SampleProducer) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	p.peers.close()
	if err := p.sock.Close(); err != nil {
		return fmt.Errorf("stream: close sample producer: %w", err)
	}
	return nil
}

// NullSampleProducer counts the batches posted to it and discards them, so
// an actor can run without a trainer (benchmarks, smoke tests).
type NullSampleProducer struct {
	Posted, Steps int64
}

// Post counts b and discards it.
func (n *NullSampleProducer) Post(b *api.SampleBatch) error {
	n.Posted++
	n.Steps += int64(b.Len())
	return nil
}

// Warning is always "".
func (n *NullSampleProducer) Warning() string { return "" }

// Close does nothing.
func (n *NullSampleProducer) Close() error { return nil }

// SampleConsumerOptions configure a SampleConsumer.
type SampleConsumerOptions struct {
	Repo   nameresolve.Repository
	Trial  names.Trial
	Stream string // default "default"
	Index  int    // the consumer's index within the stream
	Host   string // bind and advertise; "" = 127.0.0.1
	// TTL is the lease of the endpoint record; default 10 s.
	TTL time.Duration
	// RecvHWM is how many batches may wait in the consumer; default 64.
	RecvHWM int
	// MaxMsgSize is the largest batch accepted, in bytes; a producer that
	// sends more is disconnected by ZMQ. Default 64 MiB.
	MaxMsgSize int64
	Logger     *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// SampleConsumerStats are a consumer's counters since it was created.
type SampleConsumerStats struct {
	Received  int64 // valid batches returned by Poll
	Bytes     int64 // bytes of every message received, valid or not
	Malformed int64 // messages dropped as malformed or invalid
}

// SampleConsumer receives SampleBatches of one sample stream. It is for
// one goroutine.
type SampleConsumer struct {
	opts   SampleConsumerOptions
	log    *slog.Logger
	sock   *zmq.Socket
	addr   string
	key    string
	dec    *zsock.Decoder
	out    []*api.SampleBatch
	malLog zsock.RateLog
	stats  SampleConsumerStats
	closed bool
}

// NewSampleConsumer binds a PULL socket on a free port of opts.Host and
// registers it as consumer opts.Index of opts.Stream. ctx bounds the
// registration.
func NewSampleConsumer(ctx context.Context, opts SampleConsumerOptions) (*SampleConsumer, error) {
	opts.Stream = cmp.Or(opts.Stream, DefaultStream)
	opts.Host = cmp.Or(opts.Host, DefaultHost)
	opts.TTL = cmp.Or(opts.TTL, DefaultTTL)
	opts.RecvHWM = cmp.Or(opts.RecvHWM, DefaultRecvHWM)
	opts.MaxMsgSize = cmp.Or(opts.MaxMsgSize, DefaultMaxMsgSize)
	log := zsock.LoggerOr(opts.Logger).With("stream", opts.Stream)
	switch {
	case opts.Repo == nil:
		return nil, errors.New("stream: SampleConsumerOptions.Repo is required")
	case opts.Index < 0 || opts.TTL < 0 || opts.RecvHWM < 0 || opts.MaxMsgSize < 0:
		return nil, fmt.Errorf("stream: invalid SampleConsumerOptions (Index %d, TTL %v, RecvHWM %d, MaxMsgSize %d)",
			opts.Index, opts.TTL, opts.RecvHWM, opts.MaxMsgSize)
	}
	c := &SampleConsumer{
		opts: opts, log: log, dec: zsock.NewDecoder(),
		key: opts.Trial.Stream("sample", opts.Stream, opts.Index),
	}
	var err error
	o := zsock.Options{MaxMsgSize: opts.MaxMsgSize, RecvHWM: opts.RecvHWM, Curve: opts.Curve.SocketKeys()}
	if c.sock, c.addr, err = bindAndRegister(ctx, zmq.PULL, o, opts.Host, opts.Repo, c.key, opts.TTL); err != nil {
		return nil, fmt.Errorf("stream: sample consumer %d of stream %q: %w", opts.Index, opts.Stream, err)
	}
	log.Info("stream: sample consumer ready", "address", c.addr, "key", c.key)
	return c, nil
}

// Poll returns up to n (at least 1) batches that have arrived, without
// blocking. Each batch is new and belongs to the caller; the returned
// slice is reused by the next Poll. A message that does not decode or
// whose batch fails api.SampleBatch.Validate is dropped and counted
// (Stats().Malformed), never returned as an error: an error means the
// socket failed.
func (c *SampleConsumer) Poll(n int) ([]*api.SampleBatch, error) {
	clear(c.out)
	c.out = c.out[:0]
	if c.closed {
		return nil, ErrClosed
	}
	n = max(n, 1)
	for drops := 0; len(c.out) < n && drops < maxDropsPerPoll; {
		frame, err := c.sock.RecvBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			break
		}
		if err != nil {
			return c.out, fmt.Errorf("stream: receive sample batch: %w", err)
		}
		c.stats.Bytes += int64(len(frame))
		b := new(api.SampleBatch)
		if err := decodeSampleBatch(c.dec, frame, b); err != nil {
			drops++
			c.stats.Malformed++
			c.malLog.Warn(c.log, "stream: dropped malformed sample batch", "err", err, "bytes", len(frame), "malformed", c.stats.Malformed)
			continue
		}
		c.out = append(c.out, b)
		c.stats.Received++
	}
	return c.out, nil
}

// Socket is the PULL socket; it is readable when batches arrive.
func (c *SampleConsumer) Socket() *zmq.Socket { return c.sock }

// Addr is the "host:port" the consumer is bound to and registered under.
func (c *SampleConsumer) Addr() string { return c.addr }

// Stats returns the consumer's counters.
func (c *SampleConsumer) Stats() SampleConsumerStats { return c.stats }

// Close removes the endpoint record, so producers stop sending here, and
// closes the socket; batches queued in it are lost. Close is idempotent.
func (c *SampleConsumer) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	return closeBound(c.opts.Repo, c.key, c.sock, "sample consumer")
}
