package replaystream

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/internal/endpoint"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Kind is the stream kind of replay servers in name resolve:
// trial.Stream(Kind, name, index).
const Kind = "replay"

// ServerOptions configure a Server.
type ServerOptions struct {
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

// ServerStats are a server's counters.
type ServerStats struct {
	Requests      int64
	Malformed     int64
	Replies       int64
	Undeliverable int64
}

// Server receives replay requests on a ROUTER socket and sends the
// replies, in any order: a request held by a rate limiter does not hold up
// the ones behind it. It is for one goroutine.
type Server struct {
	opts   ServerOptions
	log    *slog.Logger
	sock   *zmq.Socket
	addr   string
	key    string
	dec    *zsock.Decoder
	enc    *zsock.Encoder
	malLog zsock.RateLog
	stats  ServerStats
	closed bool
}

// NewServer binds a ROUTER socket on a free port of opts.Host and
// registers it under trial.Stream(Kind, Name, Index).
func NewServer(ctx context.Context, opts ServerOptions) (*Server, error) {
	opts.Name = cmp.Or(opts.Name, DefaultName)
	if err := endpoint.Prepare("replaystream: ServerOptions", opts.Repo, &opts.Host, &opts.TTL, &opts.MaxMsgSize); err != nil {
		return nil, err
	}
	if opts.Index < 0 || opts.Index > MaxShard {
		return nil, fmt.Errorf("replaystream: replay server index %d: want 0..%d", opts.Index, MaxShard)
	}
	s := &Server{opts: opts, log: zsock.LoggerOr(opts.Logger).With("replay", opts.Name),
		key: opts.Trial.Stream(Kind, opts.Name, opts.Index), dec: zsock.NewDecoder(), enc: zsock.NewEncoder()}
	var err error
	o := zsock.Options{MaxMsgSize: opts.MaxMsgSize, RouterMandatory: true, Curve: opts.Curve.SocketKeys()}
	if s.sock, s.addr, err = endpoint.Bind(ctx, zmq.ROUTER, o, opts.Host, opts.Repo, s.key, opts.TTL, ""); err != nil {
		return nil, fmt.Errorf("replaystream: replay server %q: %w", opts.Name, err)
	}
	s.log.Info("replaystream: replay server ready", "address", s.addr, "key", s.key)
	return s, nil
}

// Recv takes up to max requests that have arrived, without blocking.
// Malformed requests are counted, answered with a bad_request error when
// their request id could be read, and dropped; they are never returned.
func (s *Server) Recv(max int) ([]*Request, error) {
	if s.closed {
		return nil, ErrClosed
	}
	var out []*Request
	for drops := 0; len(out) < max && drops < maxDropsPerPoll; {
		parts, err := s.sock.RecvMessageBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("replaystream: receive replay request: %w", err)
		}
		if len(parts) != 2 {
			s.malformed(fmt.Errorf("%d frames, want 1", len(parts)-1), parts[0], nil)
			drops++
			continue
		}
		req := &Request{identity: parts[0]}
		if err := decode(s.dec, parts[1], req); err != nil {
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

func (s *Server) malformed(err error, identity []byte, req *Request) {
	s.stats.Malformed++
	s.malLog.Warn(s.log, "replaystream: malformed replay request dropped", "err", err)
	if req != nil { // the request id is known: tell the client
		s.Reply(req, &Reply{Error: &rpc.Error{Type: ErrTypeBadRequest, Message: err.Error()}})
	}
}

// Reply sends rep to the client of req (Op and RID filled in). A client
// that is gone or whose queue is full is counted, not an error.
func (s *Server) Reply(req *Request, rep *Reply) error {
	if s.closed {
		return ErrClosed
	}
	rep.Op, rep.RID = req.Op, req.RID
	e := s.enc.Reset()
	if err := e.Encode(rep); err != nil {
		return fmt.Errorf("replaystream: encode replay reply: %w", err)
	}
	_, err := s.sock.SendMessageDontwait(req.identity, s.enc.Bytes())
	switch {
	case err == nil:
		s.stats.Replies++
	case zsock.Undeliverable(err):
		s.stats.Undeliverable++
	default:
		return fmt.Errorf("replaystream: send replay reply: %w", err)
	}
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats { return s.stats }

// Address is the bound address.
func (s *Server) Address() string { return s.addr }

// Socket is the ROUTER socket, to poll with the worker's own.
func (s *Server) Socket() *zmq.Socket { return s.sock }

// Close unregisters and closes the socket.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return endpoint.Close(s.opts.Repo, s.key, s.sock, "replay server")
}
