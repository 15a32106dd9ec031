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
	"github.com/distrl/distrl/internal/monoclock"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// maxDropsPerPoll bounds how many malformed messages one Poll discards
// beyond the rows it takes, so a flood of garbage cannot keep the policy
// worker inside Poll.
const maxDropsPerPoll = 256

// InferenceServerOptions configure an InferenceServer.
type InferenceServerOptions struct {
	Repo   nameresolve.Repository
	Trial  names.Trial
	Policy string // default "default"
	Index  int    // the policy worker's index
	Host   string // bind and advertise; "" = 127.0.0.1
	// TTL is the lease of the endpoint record: how long a killed server
	// stays registered. Default 10 s.
	TTL time.Duration
	// ObsDim is the observation length requests must have. 0 accepts the
	// first well-formed request's and holds every later one to it; set it
	// when known, so a bad first request cannot lock out good ones.
	ObsDim int
	// MaxMsgSize is the largest request accepted, in bytes; default 64 MiB.
	MaxMsgSize int64
	Logger     *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// InferenceServerStats are a server's counters since it was created.
type InferenceServerStats struct {
	Messages  int64 // requests taken into batches
	Rows      int64 // observations taken into batches
	Malformed int64 // requests dropped as malformed
	// Refused counts well-formed requests answered with an error instead
	// of an inference: their observations have the wrong length.
	Refused int64
	Replies int64 // replies sent
	// Undeliverable counts replies dropped because their client was gone
	// or its queue was full.
	Undeliverable int64
}

// span is the part of a batch that came from one request.
type span struct {
	identity []byte     // ROUTER identity of the client ...
	peer     *shmPeer   // ... or its shared-memory channel ...
	link     *localLink // ... or its link in this process
	start, n int        // rows
}

// InferenceBatch is observations from one or more requests, ready for
// one policy call. Reuse it across polls to avoid allocations.
type InferenceBatch struct {
	Obs   api.Tensor[float32] // [n, obs_dim], n = rows taken
	ids   []int64             // request id of each row
	spans []span
	shape [2]int
}

// Rows is the number of observations in the batch.
func (b *InferenceBatch) Rows() int { return len(b.ids) }

// Requests is the number of request messages the batch came from.
func (b *InferenceBatch) Requests() int { return len(b.spans) }

// reset empties the batch for the next Poll, keeping its storage: once it
// has grown to the batches the server sees, requests decode straight into
// it (see extend).
func (b *InferenceBatch) reset() {
	b.Obs.Data = b.Obs.Data[:0]
	b.ids = b.ids[:0]
	clear(b.spans) // drop identities
	b.spans = b.spans[:0]
}

// heldMsg is a request received but left for the next Poll because it did
// not fit under maxRows.
type heldMsg struct {
	identity, payload []byte
	peer              *shmPeer
}

// InferenceServer receives inference requests for one policy on a ROUTER
// socket and sends the answers back. It is for one goroutine.
type InferenceServer struct {
	opts    InferenceServerOptions
	log     *slog.Logger
	sock    *zmq.Socket
	addr    string
	key     string
	dim     int     // required observation length; 0 until known
	held    heldMsg // while hasHeld; by value, so that a request received costs no allocation
	hasHeld bool
	view    api.Inference // a reply's rows of the batch's inference, being encoded
	dec     *zsock.Decoder
	enc     *zsock.Encoder
	reqIDs  api.Tensor[int64]
	reqObs  api.Tensor[float32]
	shape1  [1]int
	shape2  [2]int
	malLog  zsock.RateLog
	stats   InferenceServerStats
	shm     *shmServer // nil: ZMQ only
	sharedWait
	// zmqLooked is when a Poll last found the ZeroMQ socket empty, zmqLive
	// whether that Poll had received from it before, zmqGotAt when a
	// request last came there (see zmqRecheck).
	zmqLooked time.Time
	zmqLive   bool
	zmqGotAt  time.Time
}

// zmqRecheck is how often a server with clients on shared memory looks at
// its ZeroMQ socket while nothing comes there: a receive that finds
// nothing costs libzmq two system calls, 3.4 us on the 2-core development
// machine, as much as a small batch's forward pass, and a busy server
// polls some 20,000 times a second. A request over ZeroMQ (a client on
// another node) then waits at most this long for a busy server; an idle
// one wakes for it at once, and one that found a request there keeps
// looking at every poll. Once nothing has come there for zmqQuiet, it
// looks every zmqRecheckQuiet: a node's own actors on shared memory then
// cost the server a tenth of those receives (with the loop's reads of its
// control socket, they were a tenth of a policy worker's CPU with 2 actors
// of 8 environments), and only the first request of a client on another
// node after such a spell waits up to a millisecond.
const (
	zmqRecheck      = 100 * time.Microsecond
	zmqRecheckQuiet = time.Millisecond
	zmqQuiet        = time.Second
)

// zmqRecheckAt is how long after finding the ZeroMQ socket empty a busy
// server looks there again.
func (s *InferenceServer) zmqRecheckAt(now time.Time) time.Duration {
	if now.Sub(s.zmqGotAt) < zmqQuiet {
		return zmqRecheck
	}
	return zmqRecheckQuiet
}

// NewInferenceServer binds a ROUTER socket on a free port of opts.Host and
// registers it for opts.Policy under opts.Index. ctx bounds the
// registration.
func NewInferenceServer(ctx context.Context, opts InferenceServerOptions) (*InferenceServer, error) {
	opts.Policy = cmp.Or(opts.Policy, DefaultPolicy)
	if err := endpoint.Prepare("stream: InferenceServerOptions", opts.Repo, &opts.Host, &opts.TTL, &opts.MaxMsgSize); err != nil {
		return nil, err
	}
	if opts.Index < 0 || opts.ObsDim < 0 {
		return nil, fmt.Errorf("stream: invalid InferenceServerOptions (Index %d, ObsDim %d)", opts.Index, opts.ObsDim)
	}
	log := zsock.LoggerOr(opts.Logger).With("policy", opts.Policy)
	s := &InferenceServer{
		opts: opts, log: log, dim: opts.ObsDim,
		key: opts.Trial.Stream("inference", opts.Policy, opts.Index),
		dec: zsock.NewDecoder(), enc: zsock.NewEncoder(),
	}
	// ROUTER_MANDATORY: a reply to a client that is gone, or whose queue is
	// full, fails at once (EHOSTUNREACH, EAGAIN with DONTWAIT) instead of
	// being dropped silently or blocking, so Respond can count it and move
	// on.
	var err error
	o := zsock.Options{MaxMsgSize: opts.MaxMsgSize, RouterMandatory: true, Curve: opts.Curve.SocketKeys()}
	var shmDir string
	if s.shm = newShmServer(log); s.shm != nil {
		s.sharedWait.peers = &s.shm.shmPeers
		shmDir = s.shm.l.Dir()
	}
	if s.sock, s.addr, err = endpoint.Bind(ctx, zmq.ROUTER, o, opts.Host, opts.Repo, s.key, opts.TTL, shmDir); err != nil {
		if s.shm != nil {
			s.shm.close()
		}
		return nil, fmt.Errorf("stream: inference server for policy %q: %w", opts.Policy, err)
	}
	log.Info("stream: inference server ready", "address", s.addr, "key", s.key)
	return s, nil
}

// Poll takes whole requests, without blocking, until the batch holds
// maxRows observations or nothing more has arrived, and returns the number
// of rows taken. A request that would take the batch past maxRows is kept
// for the next Poll, unless the batch is empty: a single request larger
// than maxRows is taken alone. b is reset and its storage reused.
//
// Malformed requests are dropped and counted (Stats), never returned as
// errors; a well-formed one whose observations have the wrong length is
// answered with a refusal, so its client fails at once and says why. An
// error means the socket failed.
func (s *InferenceServer) Poll(maxRows int, b *InferenceBatch) (rows int, err error) {
	b.reset()
	if s.closed {
		return 0, ErrClosed
	}
	maxRows = max(maxRows, 1)
	now := monoclock.Now()
	if s.shm != nil {
		s.shm.poll(now)
	}
	zmqDrained := !s.zmqLive && s.sharedPeers() > 0 && now.Sub(s.zmqLooked) < s.zmqRecheckAt(now)
	zmqGot := false              // this Poll received from the ZeroMQ socket
	localDrained := s.shm == nil // no in-process request waits
receive:
	for drops := 0; len(b.ids) < maxRows && drops < maxDropsPerPoll; {
		var msg heldMsg
		switch {
		case s.hasHeld:
			msg, s.held, s.hasHeld = s.held, heldMsg{}, false
		case !zmqDrained:
			parts, err := s.sock.RecvMessageBytes(zmq.DONTWAIT)
			if zsock.IsEAGAIN(err) {
				s.zmqLooked, s.zmqLive, zmqDrained = now, zmqGot, true
				continue
			}
			zmqGot, s.zmqGotAt = true, now
			if err != nil {
				s.finish(b)
				return len(b.ids), fmt.Errorf("stream: receive inference request: %w", err)
			}
			if len(parts) != 2 {
				// ROUTER adds the identity to the one frame a client sends.
				s.malformed(fmt.Errorf("%d frames, want 1", len(parts)-1), parts[0])
				drops++
				continue
			}
			msg.identity, msg.payload = parts[0], parts[1]
		case !localDrained:
			r, full := s.shm.inbox.take(maxRows-len(b.ids), len(b.ids) == 0)
			switch {
			case full:
				break receive
			case r == nil:
				localDrained = true
			case s.takeLocal(b, r) != nil:
				drops++
			}
			continue
		case s.shm != nil:
			if msg.peer, msg.payload = s.shm.recv(); msg.peer == nil {
				break receive
			}
		default:
			break receive
		}
		// The request's tensors decode into the batch's free storage: a
		// request taken into the batch is then not copied again.
		s.reqIDs.Data, s.reqObs.Data = tail(b.ids), tail(b.Obs.Data)
		if err := s.decode(msg.payload); err != nil {
			drops++
			if !errors.Is(err, errObsDim) {
				s.malformed(err, msg.identity)
				continue
			}
			if err := s.refuse(&msg, err); err != nil {
				s.finish(b)
				return len(b.ids), err
			}
			continue
		}
		n := s.reqIDs.Shape[0]
		if len(b.ids) > 0 && len(b.ids)+n > maxRows {
			s.held, s.hasHeld = msg, true
			break receive
		}
		b.spans = append(b.spans, span{identity: msg.identity, peer: msg.peer, start: len(b.ids), n: n})
		b.ids = extend(b.ids, s.reqIDs.Data)
		b.Obs.Data = extend(b.Obs.Data, s.reqObs.Data)
		s.stats.Messages++
		s.stats.Rows += int64(n)
	}
	s.finish(b)
	return len(b.ids), nil
}

// tail is the free capacity of s as an empty slice: a decoder that reuses
// its destination's capacity (api.Tensor does) writes there.
func tail[T any](s []T) []T { return s[len(s):len(s):cap(s)] }

// extend returns dst followed by src. When src was decoded into tail(dst),
// which is the case whenever it fitted, that is dst resliced, with nothing
// copied; otherwise (the decoder needed more room and allocated) src is
// appended.
func extend[T any](dst, src []T) []T {
	if n := len(dst); len(src) > 0 && cap(dst)-n >= len(src) && &dst[:n+1][n] == &src[0] {
		return dst[:n+len(src)]
	}
	return append(dst, src...)
}

// takeLocal adds the request of a client in this process to the batch, or
// refuses it (the error) for the wrong observation length; either way its
// storage goes back to the client.
func (s *InferenceServer) takeLocal(b *InferenceBatch, r *localRequest) error {
	defer r.link.recycle(r)
	if err := s.checkDim(r.dim); err != nil {
		s.noteRefused(err, "this process")
		if !r.link.reply(r.ids, nil, 0, err.Error()) {
			s.stats.Undeliverable++
		}
		return err
	}
	b.spans = append(b.spans, span{link: r.link, start: len(b.ids), n: len(r.ids)})
	b.ids = append(b.ids, r.ids...)
	b.Obs.Data = append(b.Obs.Data, r.obs...)
	s.stats.Messages++
	s.stats.Rows += int64(len(r.ids))
	return nil
}

// finish sets the batch's shape.
func (s *InferenceServer) finish(b *InferenceBatch) {
	b.shape[0], b.shape[1] = len(b.ids), s.dim
	b.Obs.Shape = b.shape[:]
}

// errObsDim marks a well-formed request whose observations have the wrong
// length: a configuration mismatch (say frame_stack given to the actors
// only) that the client is told of rather than left to time out.
var errObsDim = errors.New("wrong observation length")

// decode reads a request into s.reqIDs and s.reqObs and checks its
// observation length.
func (s *InferenceServer) decode(payload []byte) error {
	if err := decodeRequest(s.dec, payload, &s.reqIDs, &s.reqObs); err != nil {
		return err
	}
	return s.checkDim(s.reqObs.Shape[1])
}

// checkDim holds a request's observation length d to the server's, which
// the first request sets where the options did not.
func (s *InferenceServer) checkDim(d int) error {
	if s.dim == 0 {
		s.dim = d
		s.log.Info("stream: inference server takes observation length from the first request", "obs_dim", d)
	}
	if d != s.dim {
		return fmt.Errorf("%w: observations have %d values, policy %q wants %d", errObsDim, d, s.opts.Policy, s.dim)
	}
	return nil
}

func (s *InferenceServer) malformed(err error, identity []byte) {
	s.stats.Malformed++
	s.malLog.Warn(s.log, "stream: dropped malformed inference request", "err", err,
		"client", fmt.Sprintf("%x", identity), "malformed", s.stats.Malformed)
}

// refuse answers the request in s.reqIDs with err instead of an inference.
// The client fails those requests at once, with err's text.
func (s *InferenceServer) refuse(msg *heldMsg, err error) error {
	s.noteRefused(err, fmt.Sprintf("%x", msg.identity))
	if err := encodeRefusal(s.enc.Reset(), s.reqIDs, err.Error()); err != nil {
		return fmt.Errorf("stream: encode inference refusal: %w", err)
	}
	delivered, err := s.send(msg.identity, msg.peer)
	if err != nil {
		return fmt.Errorf("stream: send inference refusal: %w", err)
	}
	if !delivered {
		s.stats.Undeliverable++
	}
	return nil
}

// noteRefused counts and logs (rate-limited) a request refused with err.
func (s *InferenceServer) noteRefused(err error, client string) {
	s.stats.Refused++
	s.malLog.Warn(s.log, "stream: refused inference request", "err", err, "client", client, "refused", s.stats.Refused)
}

// send sends the encoder's message to one client, over shared memory if it
// came that way. It reports whether the message was delivered; a client
// that is gone or not reading is not an error.
func (s *InferenceServer) send(identity []byte, peer *shmPeer) (bool, error) {
	if peer != nil {
		return s.shm.send(peer, s.enc.Bytes()), nil
	}
	_, err := s.sock.SendBytes(identity, zmq.SNDMORE|zmq.DONTWAIT)
	if err == nil {
		// With ROUTER, once the first frame is accepted the rest is.
		_, err = s.sock.SendBytes(s.enc.Bytes(), zmq.DONTWAIT)
	}
	if zsock.Undeliverable(err) {
		return false, nil
	}
	return err == nil, err
}

// Respond sends each request of b its rows of out, whose rows align with
// b.Obs. A client that is gone or not reading loses its reply (counted as
// Undeliverable); that is not an error, since the client times out and
// retries elsewhere. An error means out does not fit b, or the socket
// failed.
func (s *InferenceServer) Respond(b *InferenceBatch, out *api.Inference) error {
	if s.closed {
		return ErrClosed
	}
	if err := checkInference(out, b.Rows()); err != nil {
		return fmt.Errorf("stream: Respond: inference does not fit the batch: %w", err)
	}
	rows := rowsOf(out) // for clients in this process
	for _, sp := range b.spans {
		if sp.link != nil {
			if sp.link.reply(b.ids[sp.start:sp.start+sp.n], &rows, sp.start, "") {
				s.stats.Replies++
			} else {
				s.stats.Undeliverable++
			}
			continue
		}
		s.shape1[0] = sp.n
		ids := api.Tensor[int64]{Shape: s.shape1[:], Data: b.ids[sp.start : sp.start+sp.n]}
		// The view's [n] shapes share shape1 with ids: the values are equal.
		s.view = inferenceRows(out, sp.start, sp.n, &s.shape1, &s.shape2)
		e := s.enc.Reset()
		if err := encodeReply(e, ids, &s.view); err != nil {
			return fmt.Errorf("stream: encode inference reply: %w", err)
		}
		delivered, err := s.send(sp.identity, sp.peer)
		switch {
		case err != nil:
			return fmt.Errorf("stream: send inference reply: %w", err)
		case delivered:
			s.stats.Replies++
		default:
			s.stats.Undeliverable++
		}
	}
	return nil
}

// Socket is the ROUTER socket; it is readable when requests arrive.
func (s *InferenceServer) Socket() *zmq.Socket { return s.sock }

// SharedMemoryClients is the number of same-node clients attached over
// shared memory or, in this process, linked to its inbox.
func (s *InferenceServer) SharedMemoryClients() int { return s.sharedPeers() }

// Addr is the "host:port" the server is bound to and registered under.
func (s *InferenceServer) Addr() string { return s.addr }

// Stats returns the server's counters.
func (s *InferenceServer) Stats() InferenceServerStats { return s.stats }

// Close removes the endpoint record, so clients stop sending here at once,
// and closes the socket; requests not answered yet time out at their
// clients. Close is idempotent.
func (s *InferenceServer) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.held, s.hasHeld = heldMsg{}, false
	err := endpoint.Close(s.opts.Repo, s.key, s.sock, "inference server")
	if s.shm != nil {
		err = errors.Join(err, s.shm.close())
	}
	return err
}
