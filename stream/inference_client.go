package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/endpoint"
	"github.com/distrl/distrl/internal/monoclock"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// ReqID identifies one posted observation. Ids increase from 1 within a
// client and are never reused.
type ReqID int64

// InferenceResult is the policy's answer for one observation.
type InferenceResult struct {
	Action     int32     // discrete action
	ContAction []float32 // continuous action (nil for discrete)
	LogProb    float32
	Value      float32
	Version    int64 // policy version that produced it
}

// InferenceClient is what an actor needs from an inference stream; both
// *RemoteInferenceClient and *InlineInferenceClient implement it. Methods
// are for one goroutine (the actor's worker loop).
type InferenceClient interface {
	// Post copies obs and queues it; it goes out at the next Flush.
	Post(obs []float32) (ReqID, error)
	// Flush sends (remote) or computes (inline) everything posted since
	// the last Flush, as one batch.
	Flush(ctx context.Context) error
	// Poll takes in replies that have arrived and expires requests older
	// than the timeout. It never blocks.
	Poll() error
	// Ready reports whether a result or a failure is available for id.
	Ready(id ReqID) bool
	// Consume takes the result for id. A failure wraps ErrInferenceFailed;
	// the caller may post the observation again.
	Consume(id ReqID) (InferenceResult, error)
	// Warning is "" when healthy, else what is wrong.
	Warning() string
	// Socket is readable when replies arrive; nil when there is nothing to
	// wait for (inline).
	Socket() *zmq.Socket
	Close() error
}

var (
	_ InferenceClient = (*RemoteInferenceClient)(nil)
	_ InferenceClient = (*InlineInferenceClient)(nil)
)

// Defaults of RemoteInferenceOptions.
const (
	DefaultPolicy           = "default"
	DefaultInferenceTimeout = 5 * time.Second
)

// RemoteInferenceOptions configure a RemoteInferenceClient.
type RemoteInferenceOptions struct {
	Repo   nameresolve.Repository
	Trial  names.Trial
	Policy string // default "default"
	// ObsDim is the length of every observation; 0 takes it from the
	// first Post.
	ObsDim int
	// Timeout is how long a request may wait for its reply, counted from
	// Post; default 5 s.
	Timeout time.Duration
	// SendHWM bounds the request messages queued per policy worker
	// (ZMQ's default, 1000, if 0). A full queue keeps requests in the
	// client until a later Flush.
	SendHWM int
	Logger  *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// InferenceClientStats are a client's counters since it was created.
type InferenceClientStats struct {
	Posted   int64 // observations posted
	Messages int64 // request messages sent
	// Bytes are the bytes of the request messages encoded (none for a
	// policy worker of this process: its requests are not).
	Bytes int64
	// SharedMemory counts the request messages sent over shared memory
	// (to policy workers on this node), out of Messages.
	SharedMemory int64
	// SameProcess counts the request messages to a policy worker of this
	// process (colocated with the client: `rlctl worker --with`), out of
	// Messages: handed over in memory, or with DISTRL_INPROCESS=0 through
	// shared memory (counted there too).
	SameProcess int64
	Replies     int64 // results received in time
	// RoundTrip is a moving average (over about 16 replies) of the time
	// from the turn that posted a request to the Poll that took its
	// reply: what a ring waits for its actions, the figure that says
	// whether more requests in flight would keep it busy (across nodes).
	RoundTrip time.Duration
	Failed    int64 // requests expired without a reply
	Late      int64 // results that came after their request expired (dropped)
	Malformed int64 // reply messages dropped as malformed
	Refused   int64 // requests a policy worker refused (ErrInferenceRefused)
}

type reqState uint8

const (
	reqQueued  reqState = iota + 1 // posted, not sent yet
	reqSent                        // sent, waiting for the reply
	reqDone                        // result available
	reqFailed                      // expired
	reqRefused                     // a policy worker refused it
)

// settled reports whether a request has an outcome for Consume.
func (s reqState) settled() bool { return s == reqDone || s == reqFailed || s == reqRefused }

// sendBlock is why requests could not be sent.
type sendBlock uint8

// stillNoRoom reports whether sock, whose last send found no room
// (blocked == sendNoRoom), still has none, so that a message need not be
// encoded yet. With IMMEDIATE, POLLOUT means some live connection has
// room. It asks the socket only while blocked: the question is a call into
// libzmq that cost an actor 13% of its CPU time with requests of 4 rows
// when asked before every send, and a send that finds no room says so
// anyway.
func stillNoRoom(sock *zmq.Socket, blocked sendBlock) bool {
	if blocked != sendNoRoom {
		return false
	}
	ev, err := sock.GetEvents()
	return err == nil && ev&zmq.POLLOUT == 0
}

const (
	sendOK       sendBlock = iota
	sendNoWorker           // no endpoint registered
	sendNoRoom             // endpoints registered, none connected or all queues full
)

type request struct {
	deadline time.Time
	state    reqState
	result   InferenceResult
}

// RemoteInferenceClient sends observations to the policy workers of one
// policy and collects their answers. It is for one goroutine.
type RemoteInferenceClient struct {
	opts  RemoteInferenceOptions
	log   *slog.Logger
	sock  *zmq.Socket
	peers *endpoint.Peers

	nextID  ReqID
	reqs    requests
	expiry  []ReqID // in Post order, hence in deadline order
	qIDs    []int64 // queued requests not sent yet ...
	qObs    []float32
	shape1  [1]int // ... and the shapes of their tensors
	shape2  [2]int
	enc     *zsock.Encoder
	dec     *zsock.Decoder
	repIDs  api.Tensor[int64]
	repInf  api.Inference
	malLog  zsock.RateLog
	blocked sendBlock // why the last Flush could not send
	peerN   int       // endpoints connected at the last Flush
	expired int64     // requests expired since the last reply arrived
	refusal string    // the last refusal's reason
	stats   InferenceClientStats
	shm     *shmClient // nil: ZMQ only
	// zmqUntil is when replies to the requests sent over ZMQ can no longer
	// be in time; zmqChecked when the socket was last read. While every
	// request goes over shared memory, Poll reads the socket only once a
	// second (a late reply is dropped anyway), as a read that finds
	// nothing still costs libzmq a system call.
	zmqUntil, zmqChecked time.Time
	// clock is the time of the last Poll or Flush, from which Post counts
	// a request's timeout: an actor posts a turn's observations between
	// them, and reading the clock once per observation cost it 8% of its
	// CPU.
	clock    time.Time
	deadline time.Time // clock + Timeout: a Post's deadline, computed once per clock
	sharedWait
}

// NewRemoteInferenceClient creates a client connected to every policy
// worker registered for opts.Policy, and to those that register later. It
// succeeds with no policy worker registered: requests wait (see Flush).
// ctx bounds the initial name-resolve lookup.
func NewRemoteInferenceClient(ctx context.Context, opts RemoteInferenceOptions) (*RemoteInferenceClient, error) {
	opts.Policy = cmp.Or(opts.Policy, DefaultPolicy)
	opts.Timeout = cmp.Or(opts.Timeout, DefaultInferenceTimeout)
	log := zsock.LoggerOr(opts.Logger).With("policy", opts.Policy)
	switch {
	case opts.Repo == nil:
		return nil, errors.New("stream: RemoteInferenceOptions.Repo is required")
	case opts.ObsDim < 0 || opts.Timeout < 0 || opts.SendHWM < 0:
		return nil, fmt.Errorf("stream: invalid RemoteInferenceOptions (ObsDim %d, Timeout %v, SendHWM %d)", opts.ObsDim, opts.Timeout, opts.SendHWM)
	}
	// LINGER 0: an unsent request is worthless once the actor is gone.
	so := endpoint.ConnectingOptions(0, opts.Curve)
	so.SendHWM = opts.SendHWM // ZMQ's default when 0
	sock, err := zsock.New(zmq.DEALER, so)
	if err != nil {
		return nil, fmt.Errorf("stream: inference client: %w", err)
	}
	prefix := opts.Trial.StreamPrefix("inference", opts.Policy)
	peers, err := endpoint.NewPeers(ctx, opts.Repo, prefix, sock, log)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("stream: inference client: %w", err)
	}
	c := &RemoteInferenceClient{
		opts:  opts,
		log:   log,
		sock:  sock,
		peers: peers,
		enc:   zsock.NewEncoder(),
		dec:   zsock.NewDecoder(),
	}
	if c.shm = newShmClient(log); c.shm != nil {
		c.sharedWait.peers = &c.shm.shmPeers
		peers.Observe = c.shm.observe
		c.shm.observe(peers.Last)
	}
	return c, nil
}

// Post copies obs and queues it for the next Flush. Its timeout starts at
// the last Poll or Flush (now, for a client's first Post).
func (c *RemoteInferenceClient) Post(obs []float32) (ReqID, error) {
	if c.closed {
		return 0, ErrClosed
	}
	if c.opts.ObsDim == 0 {
		c.opts.ObsDim = len(obs)
	}
	if len(obs) != c.opts.ObsDim || len(obs) == 0 {
		return 0, fmt.Errorf("stream: Post: observation has %d values, want %d", len(obs), c.opts.ObsDim)
	}
	c.nextID++
	id := c.nextID
	if c.clock.IsZero() {
		c.setClock(time.Now())
	}
	c.reqs.add(id, request{deadline: c.deadline, state: reqQueued})
	c.expiry = append(c.expiry, id)
	c.qIDs = append(c.qIDs, int64(id))
	c.qObs = append(c.qObs, obs...)
	c.stats.Posted++
	return id, nil
}

// setClock sets the time Posts count their deadlines from.
func (c *RemoteInferenceClient) setClock(now time.Time) {
	c.clock, c.deadline = now, now.Add(c.opts.Timeout)
}

// Flush sends everything queued as one message to the next live policy
// worker. With no policy worker reachable, or all of their queues full, the
// requests stay queued for a later Flush (until they expire) and Warning
// says why; that is not an error. An error means the socket failed.
func (c *RemoteInferenceClient) Flush(ctx context.Context) error {
	if c.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.setClock(monoclock.Now())
	n := c.peers.Sync()
	c.peerN = n
	if n == 0 {
		c.blocked = sendNoWorker
		return nil
	}
	if len(c.qIDs) == 0 {
		if c.blocked == sendNoWorker {
			c.blocked = sendOK
		}
		return nil
	}
	// While the last Flush found no room, skip encoding until something
	// could take the message.
	if c.sharedPeers() == 0 && stillNoRoom(c.sock, c.blocked) {
		return nil
	}
	// A policy worker of this process takes the rows as they are.
	if c.shm.postLocal(c.qIDs, c.qObs, c.opts.ObsDim) {
		c.stats.SameProcess++
	} else if sent, err := c.send(); err != nil || !sent {
		return err
	}
	for _, id := range c.qIDs {
		if r := c.reqs.at(ReqID(id)); r != nil { // queued ids are held: expire takes failed ones out
			r.state = reqSent
		}
	}
	c.qIDs, c.qObs = c.qIDs[:0], c.qObs[:0]
	c.blocked = sendOK
	c.stats.Messages++
	return nil
}

// send encodes the queued requests as one message and sends it: through
// shared memory to a policy worker on this node, or over ZMQ where no ring
// has room. sent is false when ZMQ had no room either (Flush tries again
// later).
func (c *RemoteInferenceClient) send() (sent bool, err error) {
	rows := len(c.qIDs)
	c.shape1[0] = rows
	c.shape2[0], c.shape2[1] = rows, c.opts.ObsDim
	e := c.enc.Reset()
	ids := api.Tensor[int64]{Shape: c.shape1[:], Data: c.qIDs}
	obs := api.Tensor[float32]{Shape: c.shape2[:], Data: c.qObs}
	if err := encodeRequest(e, ids, obs); err != nil {
		return false, fmt.Errorf("stream: encode inference request: %w", err)
	}
	if sent, ownProcess := c.shm.send(c.enc.Bytes()); sent {
		c.stats.SharedMemory++
		if ownProcess {
			c.stats.SameProcess++
		}
		c.stats.Bytes += int64(c.enc.Len())
		return true, nil
	}
	if _, err := c.sock.SendBytes(c.enc.Bytes(), zmq.DONTWAIT); err != nil {
		if zsock.IsEAGAIN(err) {
			// IMMEDIATE makes this the answer when no connection is up
			// (the registered workers are down or still connecting) or
			// every queue is full.
			c.blocked = sendNoRoom
			return false, nil
		}
		return false, fmt.Errorf("stream: send inference request: %w", err)
	}
	c.zmqUntil = c.clock.Add(2 * c.opts.Timeout)
	c.stats.Bytes += int64(c.enc.Len())
	return true, nil
}

// Poll takes in the replies that have arrived and fails requests whose
// timeout passed. It never blocks. Malformed and late replies are dropped
// and counted, not returned as errors: the client never fails because of
// what a peer sent.
func (c *RemoteInferenceClient) Poll() error {
	if c.closed {
		return ErrClosed
	}
	c.peers.Sync()
	now := monoclock.Now()
	c.setClock(now)
	readZMQ := true
	if c.shm != nil {
		n := len(c.shm.peers)
		c.shm.upkeep(now)
		c.shm.locals.take(func(r *localResult, refusal string) {
			c.settle(r.id, r.first, r.refused, refusal, r.res, now)
		})
		for p, frame := c.shm.recv(); p != nil; p, frame = c.shm.recv() {
			c.takeReply(frame, now)
		}
		if len(c.shm.peers) != n { // a dead or corrupt channel was dropped
			c.shm.sortLocal()
		}
		readZMQ = !now.After(c.zmqUntil) || now.Sub(c.zmqChecked) >= time.Second
	}
	if readZMQ {
		c.zmqChecked = now
		for {
			frame, err := c.sock.RecvBytes(zmq.DONTWAIT)
			if zsock.IsEAGAIN(err) {
				break
			}
			if err != nil {
				return fmt.Errorf("stream: receive inference reply: %w", err)
			}
			c.takeReply(frame, now)
		}
	}
	c.expire(now)
	return nil
}

// takeReply records the results of one reply message, taken in at now.
func (c *RemoteInferenceClient) takeReply(frame []byte, now time.Time) {
	refusal, err := decodeReply(c.dec, frame, &c.repIDs, &c.repInf)
	if err != nil {
		c.stats.Malformed++
		c.malLog.Warn(c.log, "stream: dropped malformed inference reply", "err", err, "bytes", len(frame), "malformed", c.stats.Malformed)
		return
	}
	rows := rowsOf(&c.repInf)
	for i, id := range c.repIDs.Data {
		var res InferenceResult
		if refusal == "" {
			res = rows.at(i)
		}
		c.settle(id, i == 0, refusal != "", refusal, res, now)
	}
}

// settle records the outcome of request id, a row of a reply taken in at
// now: first says it is the reply's first row (the requests of one reply
// were posted together, and its round trip is timed), refused that the
// policy worker refused it, for the reason refusal.
func (c *RemoteInferenceClient) settle(id int64, first, refused bool, refusal string, res InferenceResult, now time.Time) {
	if refused {
		c.refusal = refusal
	}
	r := c.reqs.at(ReqID(id))
	if r == nil || r.state != reqSent {
		// Expired (and maybe consumed) already, or an id this client
		// never sent.
		c.stats.Late++
		return
	}
	if first {
		c.noteRoundTrip(now.Sub(r.deadline.Add(-c.opts.Timeout)))
	}
	if refused {
		r.state = reqRefused
		c.stats.Refused++
		return
	}
	r.state = reqDone
	r.result = res
	c.stats.Replies++
	c.expired = 0
}

// noteRoundTrip adds one round trip to the moving average.
func (c *RemoteInferenceClient) noteRoundTrip(d time.Duration) {
	if c.stats.RoundTrip == 0 {
		c.stats.RoundTrip = d
		return
	}
	c.stats.RoundTrip += (d - c.stats.RoundTrip) / 16
}

// expire fails the requests whose deadline passed, including queued ones,
// which are taken out of the queue so they are never sent.
func (c *RemoteInferenceClient) expire(now time.Time) {
	var dequeue bool
	i := 0
	for ; i < len(c.expiry); i++ {
		id := c.expiry[i]
		r := c.reqs.at(id)
		if r == nil || r.state.settled() {
			continue
		}
		if now.Before(r.deadline) {
			break
		}
		dequeue = dequeue || r.state == reqQueued
		r.state = reqFailed
		c.stats.Failed++
		c.expired++
	}
	if i > 0 {
		// Slide rather than reslice so the array does not grow forever.
		c.expiry = c.expiry[:copy(c.expiry, c.expiry[i:])]
	}
	if dequeue {
		c.compactQueue()
	}
}

// compactQueue drops queued requests that are no longer queued.
func (c *RemoteInferenceClient) compactQueue() {
	d := c.opts.ObsDim
	k := 0
	for j, id := range c.qIDs {
		if r := c.reqs.at(ReqID(id)); r == nil || r.state != reqQueued {
			continue
		}
		c.qIDs[k] = id
		copy(c.qObs[k*d:(k+1)*d], c.qObs[j*d:(j+1)*d])
		k++
	}
	c.qIDs, c.qObs = c.qIDs[:k], c.qObs[:k*d]
}

// Ready reports whether id has a result or has failed.
func (c *RemoteInferenceClient) Ready(id ReqID) bool { return c.reqs.settled(id) }

// Consume takes the outcome of id, which must be Ready. A request that
// expired gives an error wrapping ErrInferenceFailed, one a policy worker
// refused an error wrapping ErrInferenceRefused with its reason; an id
// never posted or already consumed gives one wrapping ErrUnknownRequest.
func (c *RemoteInferenceClient) Consume(id ReqID) (InferenceResult, error) {
	return consume(&c.reqs, id, func(s reqState) error {
		if s == reqRefused {
			return fmt.Errorf("stream: request %d for policy %q: %w: %s", id, c.opts.Policy, ErrInferenceRefused, c.refusal)
		}
		return fmt.Errorf("stream: request %d for policy %q: %w: no reply within %v", id, c.opts.Policy, ErrInferenceFailed, c.opts.Timeout)
	})
}

// errPending is returned by Consume for a request that is neither done nor
// failed yet; calling Consume before Ready is a caller bug.
var errPending = errors.New("stream: Consume before Ready")

func consume(reqs *requests, id ReqID, failure func(reqState) error) (InferenceResult, error) {
	r := reqs.at(id)
	switch {
	case r == nil:
		return InferenceResult{}, fmt.Errorf("request %d: %w", id, ErrUnknownRequest)
	case r.state == reqDone:
		res := r.result
		reqs.remove(id)
		return res, nil
	case r.state == reqFailed || r.state == reqRefused:
		s := r.state
		reqs.remove(id)
		return InferenceResult{}, failure(s)
	}
	return InferenceResult{}, fmt.Errorf("request %d: %w", id, errPending)
}

// Warning says why requests are not being answered: no policy worker
// registered, none reachable, or requests timing out. It is "" once
// requests go out and replies come back.
func (c *RemoteInferenceClient) Warning() string {
	var parts []string
	switch c.blocked {
	case sendNoWorker:
		parts = append(parts, fmt.Sprintf("no policy worker for policy %q", c.opts.Policy))
	case sendNoRoom:
		parts = append(parts, fmt.Sprintf("%d policy worker(s) registered for policy %q but none accepting requests", c.peerN, c.opts.Policy))
	}
	if c.refusal != "" {
		parts = append(parts, fmt.Sprintf("policy %q refused %d request(s): %s", c.opts.Policy, c.stats.Refused, c.refusal))
	}
	if c.expired > 0 {
		parts = append(parts, fmt.Sprintf("%d inference request(s) to policy %q timed out after %v", c.expired, c.opts.Policy, c.opts.Timeout))
	}
	return strings.Join(parts, "; ")
}

// Stats returns the client's counters.
func (c *RemoteInferenceClient) Stats() InferenceClientStats { return c.stats }

// Socket is the DEALER socket; it is readable when replies have arrived.
func (c *RemoteInferenceClient) Socket() *zmq.Socket { return c.sock }

// SharedMemoryServers is the number of same-node policy workers this client
// reaches over shared memory or in its own process.
func (c *RemoteInferenceClient) SharedMemoryServers() int { return c.sharedPeers() }

// Close stops following name resolve and closes the socket. Requests
// still outstanding are abandoned. Close is idempotent.
func (c *RemoteInferenceClient) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.peers.Close()
	if c.shm != nil {
		if err := c.shm.close(); err != nil {
			c.log.Debug("stream: close shared-memory doorbell", "err", err)
		}
	}
	if err := c.sock.Close(); err != nil {
		return fmt.Errorf("stream: close inference client: %w", err)
	}
	return nil
}
