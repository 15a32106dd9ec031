package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/endpoint"
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
	// gatherBytes and gatherFrames bound the batches a producer gathers
	// into one message: enough to make a turn's batches of short episodes
	// one message, little enough that SendHWM messages stay a modest queue.
	gatherBytes  = 256 << 10
	gatherFrames = 64
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
	// Flush sends what Post accepted and gathered; an actor calls it after
	// each turn. What cannot go out now stays for the next Flush or Post.
	Flush()
	// Buffered is how much of what Post accepted has not gone out yet, in
	// the poster's own unit (batches, transitions); 0 once all of it has.
	// An actor that has finished does not complete before it is 0.
	Buffered() int
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
	// Gather makes Post gather batches for Flush to send as one message
	// (see SampleProducer); without it Post sends each batch at once.
	Gather bool
}

// SampleProducerStats are a producer's counters since it was created.
type SampleProducerStats struct {
	Posted       int64 // batches sent
	Messages     int64 // messages sent (each carries one or more batches)
	Steps        int64 // steps in the batches sent
	Bytes        int64 // encoded bytes sent
	Backpressure int64 // Posts that returned ErrBackpressure
}

// SampleProducer sends SampleBatches to the consumers of one sample stream.
// It is for one goroutine.
//
// A message carries one or more batches, a frame each (ZeroMQ delivers
// all of a message or none of it). Post sends each batch as its own
// message, unless the options say Gather: Post then encodes the batch and
// gathers it, and Flush sends what was gathered as one message, as does a
// Post that finds gatherBytes or gatherFrames gathered. An actor whose
// short episodes end a few batches per turn sends one message per turn
// instead of one per batch: each message costs the actor, the consumer
// and both their ZeroMQ threads a wake-up.
//
// Back-pressure contract: the queues between an actor and the trainers are
// bounded, SendHWM messages per consumer here plus RecvHWM in each
// consumer, and at most one message's worth gathered. When all of them
// are full, or no consumer is registered, Post returns ErrBackpressure
// without taking the batch; the caller keeps it, stops stepping its
// environments, and posts the same batch again (after polling its
// sockets) until it is taken. No batch is dropped or duplicated.
type SampleProducer struct {
	opts    SampleProducerOptions
	log     *slog.Logger
	sock    *zmq.Socket
	peers   *endpoint.Peers
	enc     *zsock.Encoder
	blocked sendBlock // why the last send did not happen
	stats   SampleProducerStats
	closed  bool

	gathered      [][]byte // encoded batches: the frames of the next message
	gatheredBytes int
	gatheredSteps int
	spare         [][]byte // frame buffers of sent messages, for reuse
	err           error    // a send failure Flush found, for the next Post
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
	so := endpoint.ConnectingOptions(producerLinger, opts.Curve)
	so.SendHWM = opts.SendHWM
	sock, err := zsock.New(zmq.PUSH, so)
	if err != nil {
		return nil, fmt.Errorf("stream: sample producer: %w", err)
	}
	peers, err := endpoint.NewPeers(ctx, opts.Repo, opts.Trial.StreamPrefix("sample", opts.Stream), sock, log)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("stream: sample producer: %w", err)
	}
	return &SampleProducer{opts: opts, log: log, sock: sock, peers: peers, enc: zsock.NewEncoder()}, nil
}

// Post validates b, encodes it and sends it, or with Gather gathers it
// for the next message (see the type's documentation). It never blocks:
// when a message must go out and no consumer has room, it returns
// ErrBackpressure and b was not taken. An invalid batch or one over
// MaxMsgSize is an error (wrapping ErrTooLarge for the latter); retrying
// it cannot help.
func (p *SampleProducer) Post(b *api.SampleBatch) error {
	if p.closed {
		return ErrClosed
	}
	if err := p.err; err != nil {
		p.err = nil
		return err
	}
	if len(p.gathered) > 0 && (p.blocked != sendOK || len(p.gathered) >= gatherFrames || p.gatheredBytes >= gatherBytes) {
		if err := p.send(); err != nil {
			return p.refused(err)
		}
	}
	if len(p.gathered) == 0 {
		// Encoding is the expensive part; while back-pressured (an actor
		// retries every poll) skip it until a pipe has room.
		if why := p.room(); why != sendOK {
			return p.refused(p.backpressure(why))
		}
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("stream: Post: %w", err)
	}
	e := p.enc.Reset()
	if err := b.EncodeMsgpack(e); err != nil { // the codec itself: Encode would find it through reflection
		return fmt.Errorf("stream: encode sample batch: %w", err)
	}
	size := p.enc.Len()
	if int64(size) > p.opts.MaxMsgSize {
		return fmt.Errorf("stream: Post: batch of %d steps encodes to %d bytes: %w (limit %d)", b.Len(), size, ErrTooLarge, p.opts.MaxMsgSize)
	}
	if int64(p.gatheredBytes+size) > p.opts.MaxMsgSize {
		if err := p.send(); err != nil {
			return p.refused(err)
		}
	}
	var frame []byte
	if n := len(p.spare); n > 0 {
		frame, p.spare = p.spare[n-1][:0], p.spare[:n-1]
	}
	p.gathered = append(p.gathered, append(frame, p.enc.Bytes()...))
	p.gatheredBytes += size
	p.gatheredSteps += b.Len()
	if p.opts.Gather {
		return nil
	}
	// Nothing else was gathered, and room was looked for above.
	if err := p.transmit(); err != nil {
		p.recycle() // not taken after all
		return p.refused(err)
	}
	return nil
}

// Flush implements SamplePoster: it sends the gathered batches if a
// consumer has room. A socket failure is returned by the next Post.
func (p *SampleProducer) Flush() {
	if p.closed || len(p.gathered) == 0 {
		return
	}
	if err := p.send(); err != nil && !errors.Is(err, ErrBackpressure) {
		p.err = err
	}
}

// Buffered is the number of batches gathered and not sent yet.
func (p *SampleProducer) Buffered() int { return len(p.gathered) }

// room says whether a message could go out now: sendOK, or why not.
func (p *SampleProducer) room() sendBlock {
	switch {
	case p.peers.Sync() == 0:
		return sendNoWorker
	case stillNoRoom(p.sock, p.blocked):
		return sendNoRoom
	}
	return sendOK
}

// send sends the gathered batches as one message, or returns
// ErrBackpressure (keeping them) when no consumer has room.
func (p *SampleProducer) send() error {
	if why := p.room(); why != sendOK {
		return p.backpressure(why)
	}
	return p.transmit()
}

// transmit is send once room was looked for.
func (p *SampleProducer) transmit() error {
	last := len(p.gathered) - 1
	for i, frame := range p.gathered {
		flags := zmq.DONTWAIT
		if i < last {
			flags |= zmq.SNDMORE
		}
		// ZeroMQ checks for room at a message's first frame only: the
		// rest of a message it took never finds the pipe full.
		if _, err := p.sock.SendBytes(frame, flags); err != nil {
			if i == 0 && zsock.IsEAGAIN(err) {
				return p.backpressure(sendNoRoom)
			}
			return fmt.Errorf("stream: send sample batches: %w", err)
		}
	}
	p.blocked = sendOK
	p.stats.Posted += int64(len(p.gathered))
	p.stats.Messages++
	p.stats.Steps += int64(p.gatheredSteps)
	p.stats.Bytes += int64(p.gatheredBytes)
	p.recycle()
	return nil
}

// recycle empties the gathered batches, keeping their buffers for reuse.
func (p *SampleProducer) recycle() {
	p.spare = append(p.spare, p.gathered...)
	clear(p.gathered)
	p.gathered, p.gatheredBytes, p.gatheredSteps = p.gathered[:0], 0, 0
}

// refused counts a Post refused with back-pressure; other errors pass.
func (p *SampleProducer) refused(err error) error {
	if errors.Is(err, ErrBackpressure) {
		p.stats.Backpressure++
	}
	return err
}

// backpressure records why nothing could be sent.
func (p *SampleProducer) backpressure(why sendBlock) error {
	p.blocked = why
	return ErrBackpressure
}

// Warning says that the last send found no consumer; "" once a message
// goes out. Consumers that have no room are no warning: that is how a
// trial whose trainer is its slowest part runs (the actor's Note says so).
func (p *SampleProducer) Warning() string {
	if p.blocked == sendNoWorker {
		return fmt.Sprintf("no sample consumer for stream %q", p.opts.Stream)
	}
	return ""
}

// Stats returns the producer's counters.
func (p *SampleProducer) Stats() SampleProducerStats { return p.stats }

// Socket is the PUSH socket; it is writable when a consumer has room, so a
// back-pressured actor can wait on it.
func (p *SampleProducer) Socket() *zmq.Socket { return p.sock }

// Close sends the gathered batches (waiting up to 2 s for room), stops
// following name resolve and closes the socket, giving queued messages up
// to 2 s to reach their consumers. Close is idempotent.
func (p *SampleProducer) Close() error {
	if p.closed {
		return nil
	}
	if len(p.gathered) > 0 {
		p.flushBefore(time.Now().Add(producerLinger))
	}
	p.closed = true
	p.peers.Close()
	if err := p.sock.Close(); err != nil {
		return fmt.Errorf("stream: close sample producer: %w", err)
	}
	return nil
}

// flushBefore sends the gathered batches, waiting for room until deadline;
// what is still gathered then is lost, and logged.
func (p *SampleProducer) flushBefore(deadline time.Time) {
	poller := zmq.NewPoller()
	poller.Add(p.sock, zmq.POLLOUT)
	for {
		err := p.send()
		if err == nil {
			return
		}
		wait := time.Until(deadline)
		if !errors.Is(err, ErrBackpressure) || wait <= 0 {
			p.log.Warn("stream: sample batches not sent at close", "batches", len(p.gathered), "steps", p.gatheredSteps, "err", err)
			return
		}
		if _, err := poller.Poll(min(wait, 50*time.Millisecond)); err != nil {
			p.log.Warn("stream: sample batches not sent at close", "batches", len(p.gathered), "err", err)
			return
		}
	}
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

// Flush does nothing.
func (n *NullSampleProducer) Flush() {}

// Buffered is always 0: nothing is kept.
func (n *NullSampleProducer) Buffered() int { return 0 }

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
	// Reuse says that the caller keeps no batch Poll returned, nor
	// anything in it, past its next Poll: Poll then decodes into the
	// batches it returned the last time, reusing their storage, where
	// otherwise each batch is new. A sink that counts and forgets sets it;
	// a learner that keeps batches until its update does not.
	Reuse bool
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
	spare  []*api.SampleBatch // with Reuse: the batches to decode into
	frames [][]byte           // of the message being read: batches not returned yet
	malLog zsock.RateLog
	stats  SampleConsumerStats
	closed bool
}

// NewSampleConsumer binds a PULL socket on a free port of opts.Host and
// registers it as consumer opts.Index of opts.Stream. ctx bounds the
// registration.
func NewSampleConsumer(ctx context.Context, opts SampleConsumerOptions) (*SampleConsumer, error) {
	opts.Stream = cmp.Or(opts.Stream, DefaultStream)
	opts.RecvHWM = cmp.Or(opts.RecvHWM, DefaultRecvHWM)
	if err := endpoint.Prepare("stream: SampleConsumerOptions", opts.Repo, &opts.Host, &opts.TTL, &opts.MaxMsgSize); err != nil {
		return nil, err
	}
	if opts.Index < 0 || opts.RecvHWM < 0 {
		return nil, fmt.Errorf("stream: invalid SampleConsumerOptions (Index %d, RecvHWM %d)", opts.Index, opts.RecvHWM)
	}
	log := zsock.LoggerOr(opts.Logger).With("stream", opts.Stream)
	c := &SampleConsumer{
		opts: opts, log: log, dec: zsock.NewDecoder(),
		key: opts.Trial.Stream("sample", opts.Stream, opts.Index),
	}
	var err error
	o := zsock.Options{MaxMsgSize: opts.MaxMsgSize, RecvHWM: opts.RecvHWM, Curve: opts.Curve.SocketKeys()}
	if c.sock, c.addr, err = endpoint.Bind(ctx, zmq.PULL, o, opts.Host, opts.Repo, c.key, opts.TTL, ""); err != nil {
		return nil, fmt.Errorf("stream: sample consumer %d of stream %q: %w", opts.Index, opts.Stream, err)
	}
	log.Info("stream: sample consumer ready", "address", c.addr, "key", c.key)
	return c, nil
}

// Poll returns up to n (at least 1) batches that have arrived, without
// blocking; the batches of a message it did not return wait for the next
// Poll. Each batch is new and belongs to the caller (with
// SampleConsumerOptions.Reuse, until the next Poll); the returned
// slice is reused by the next Poll. A message that does not decode or
// whose batch fails api.SampleBatch.Validate is dropped and counted
// (Stats().Malformed), never returned as an error: an error means the
// socket failed.
func (c *SampleConsumer) Poll(n int) ([]*api.SampleBatch, error) {
	if c.opts.Reuse {
		c.spare = append(c.spare, c.out...)
	}
	clear(c.out)
	c.out = c.out[:0]
	if c.closed {
		return nil, ErrClosed
	}
	n = max(n, 1)
	for drops := 0; len(c.out) < n && drops < maxDropsPerPoll; {
		if len(c.frames) == 0 {
			frames, err := c.sock.RecvMessageBytes(zmq.DONTWAIT)
			if zsock.IsEAGAIN(err) {
				break
			}
			if err != nil {
				return c.out, fmt.Errorf("stream: receive sample batch: %w", err)
			}
			c.frames = frames
		}
		frame := c.frames[0]
		c.frames[0], c.frames = nil, c.frames[1:]
		c.stats.Bytes += int64(len(frame))
		b := c.batch()
		if err := decodeSampleBatch(c.dec, frame, b); err != nil {
			if c.opts.Reuse {
				c.spare = append(c.spare, b)
			}
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

// maxSpare bounds the batches Recycle keeps: about an update's worth of
// short batches.
const maxSpare = 1024

// Recycle hands back batches Poll returned that the caller keeps no more,
// nor anything in them: later Polls decode into them, reusing their
// storage (a learner's update of thousands of steps would otherwise
// allocate its observations anew for every update, and on a large frame
// pay the page faults of fresh memory). Beyond an update's worth they are
// left to the garbage collector.
func (c *SampleConsumer) Recycle(batches ...*api.SampleBatch) {
	for _, b := range batches {
		if len(c.spare) >= maxSpare {
			return
		}
		if b != nil {
			c.spare = append(c.spare, b)
		}
	}
}

// batch is the batch to decode the next frame into: a spare one (Reuse,
// Recycle), else a new one.
func (c *SampleConsumer) batch() *api.SampleBatch {
	if k := len(c.spare); k > 0 {
		b := c.spare[k-1]
		c.spare[k-1], c.spare = nil, c.spare[:k-1]
		return b
	}
	return new(api.SampleBatch)
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
	return endpoint.Close(c.opts.Repo, c.key, c.sock, "sample consumer")
}
