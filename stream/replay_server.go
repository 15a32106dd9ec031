package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"

	"github.com/distrl/distrl/internal/endpoint"
)

// ReplayKind is the stream kind of replay servers in name resolve:
// trial.Stream(ReplayKind, name, index).
const ReplayKind = "replay"

// ReplayServerOptions configure a ReplayServer.
type ReplayServerOptions struct {
	Repo  nameresolve.Repository
	Trial names.Trial
	// Name is the replay stream's name (default "default"); Index the
	// replay worker's index, which is its shard.
	Name       string
	Index      int
	Host       string
	TTL        time.Duration
	MaxMsgSize int64
	Logger     *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

// ReplayServerStats are a server's counters.
type ReplayServerStats struct {
	Requests      int64
	Malformed     int64
	Replies       int64
	Undeliverable int64
}

// ReplayServer receives replay requests on a ROUTER socket and sends the
// replies, in any order: a request held by a rate limiter does not hold up
// the ones behind it. It is for one goroutine.
type ReplayServer struct {
	opts   ReplayServerOptions
	log    *slog.Logger
	sock   *zmq.Socket
	addr   string
	key    string
	dec    *zsock.Decoder
	enc    *zsock.Encoder
	malLog zsock.RateLog
	stats  ReplayServerStats
	closed bool
}

// NewReplayServer binds a ROUTER socket on a free port of opts.Host and
// registers it under trial.Stream(ReplayKind, Name, Index).
func NewReplayServer(ctx context.Context, opts ReplayServerOptions) (*ReplayServer, error) {
	opts.Name = cmp.Or(opts.Name, DefaultStream)
	opts.Host = cmp.Or(opts.Host, DefaultHost)
	opts.TTL = cmp.Or(opts.TTL, DefaultTTL)
	opts.MaxMsgSize = cmp.Or(opts.MaxMsgSize, DefaultMaxMsgSize)
	if opts.Repo == nil {
		return nil, errors.New("stream: ReplayServerOptions.Repo is required")
	}
	if opts.Index < 0 || opts.Index > MaxReplayShard {
		return nil, fmt.Errorf("stream: replay server index %d: want 0..%d", opts.Index, MaxReplayShard)
	}
	s := &ReplayServer{opts: opts, log: zsock.LoggerOr(opts.Logger).With("replay", opts.Name),
		key: opts.Trial.Stream(ReplayKind, opts.Name, opts.Index), dec: zsock.NewDecoder(), enc: zsock.NewEncoder()}
	var err error
	o := zsock.Options{MaxMsgSize: opts.MaxMsgSize, RouterMandatory: true, Curve: opts.Curve.SocketKeys()}
	if s.sock, s.addr, err = endpoint.Bind(ctx, zmq.ROUTER, o, opts.Host, opts.Repo, s.key, opts.TTL, ""); err != nil {
		return nil, fmt.Errorf("stream: replay server %q: %w", opts.Name, err)
	}
	s.log.Info("stream: replay server ready", "address", s.addr, "key", s.key)
	return s, nil
}

// Recv takes up to max requests that have arrived, without blocking.
// Malformed requests are counted, answered with a bad_request error when
// their request id could be read, and dropped; they are never returned.
func (s *ReplayServer) Recv(max int) ([]*ReplayRequest, error) {
	if s.closed {
		return nil, ErrClosed
	}
	var out []*ReplayRequest
	for drops := 0; len(out) < max && drops < maxDropsPerPoll; {
		parts, err := s.sock.RecvMessageBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("stream: receive replay request: %w", err)
		}
		if len(parts) != 2 {
			s.malformed(fmt.Errorf("%d frames, want 1", len(parts)-1), parts[0], nil)
			drops++
			continue
		}
		req := &ReplayRequest{identity: parts[0]}
		if err := decodeReplay(s.dec, parts[1], req); err != nil {
			s.malformed(err, parts[0], nil)
			drops++
			continue
		}
		if err := req.validate(); err != nil {
			s.malformed(err, parts[0], req)
			drops++
			continue
		}
		s.stats.Requests++
		out = append(out, req)
	}
	return out, nil
}

func (s *ReplayServer) malformed(err error, identity []byte, req *ReplayRequest) {
	s.stats.Malformed++
	s.malLog.Warn(s.log, "stream: malformed replay request dropped", "err", err)
	if req != nil { // the request id is known: tell the client
		s.Reply(req, &ReplayReply{Error: &ReplayError{Type: ReplayErrBadRequest, Message: err.Error()}})
	}
}

// Reply sends rep to the client of req (Op and RID filled in). A client
// that is gone or whose queue is full is counted, not an error.
func (s *ReplayServer) Reply(req *ReplayRequest, rep *ReplayReply) error {
	if s.closed {
		return ErrClosed
	}
	rep.Op, rep.RID = req.Op, req.RID
	e := s.enc.Reset()
	if err := e.Encode(rep); err != nil {
		return fmt.Errorf("stream: encode replay reply: %w", err)
	}
	_, err := s.sock.SendMessageDontwait(req.identity, s.enc.Bytes())
	switch {
	case err == nil:
		s.stats.Replies++
	case zsock.IsEAGAIN(err) || zsock.IsHostUnreachable(err):
		s.stats.Undeliverable++
	default:
		return fmt.Errorf("stream: send replay reply: %w", err)
	}
	return nil
}

// Stats returns the server's counters.
func (s *ReplayServer) Stats() ReplayServerStats { return s.stats }

// Address is the bound address.
func (s *ReplayServer) Address() string { return s.addr }

// Socket is the ROUTER socket, to poll with the worker's own.
func (s *ReplayServer) Socket() *zmq.Socket { return s.sock }

// Close unregisters and closes the socket.
func (s *ReplayServer) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return endpoint.Close(s.opts.Repo, s.key, s.sock, "replay server")
}
