package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	zmq "github.com/pebbe/zmq4"
)

// DefaultMaxPayload is the request size limit when ServerOptions.MaxPayload
// is 0.
const DefaultMaxPayload = 64 << 20

// pollSlice bounds each blocking zmq poll so that context cancellation is
// noticed promptly even though zmq knows nothing about Go contexts.
const pollSlice = 50 * time.Millisecond

// ServerOptions configure NewServer.
type ServerOptions struct {
	// Host is the interface to bind; "" means "127.0.0.1".
	Host string
	// Port to bind; 0 picks a random free port (see Server.Addr).
	Port int
	// MaxPayload is the largest request, in bytes, that gets an answer
	// other than payload_too_large; 0 means DefaultMaxPayload. Requests
	// far above it (4x, at least 1 MiB) are dropped by libzmq before
	// they are buffered whole, and the offending connection is closed
	// without a reply.
	MaxPayload int
	// Curve, when set, makes the server a CURVE server with this key
	// pair: only clients that know Curve.Public can talk to it.
	Curve *CurveKeyPair
	// Logger receives handler panics (with stack) and, at debug level,
	// rejected requests; nil means slog.Default().
	Logger *slog.Logger
	// Mux is the command table of requests that name no worker; nil means
	// a new empty one (Server.Mux). It may be filled before or after
	// NewServer. Requests that name a worker go to its Mux (Server.Route).
	Mux *Mux
	// NoDefault makes requests that name no worker fail with
	// unknown_worker instead of going to Mux: a server shared by many
	// workers cannot guess which one a request is for.
	NoDefault bool
}

// Server answers requests on a ZMQ REP socket by dispatching them to the
// handlers of its Mux.
//
// Mux and Addr are safe for concurrent use. The other methods
// use the socket and are meant to be called from one goroutine (the worker's
// loop, or Serve's); they are serialized internally, so misuse is slow rather
// than a data race. Close may be called from any goroutine: it waits for the
// current poll slice or handler to finish. Called while a handler runs
// (possibly by the handler itself), it returns at once and the socket is
// closed as soon as that HandleRequests returns.
type Server struct {
	addr       string
	maxPayload int
	log        *slog.Logger

	// opMu serializes all use of sock and poller: zmq sockets must not be
	// used by two threads at once.
	opMu    sync.Mutex
	sock    *zmq.Socket
	poller  *zmq.Poller
	closed  bool // guarded by opMu
	closing atomic.Bool
	// inHandler is set while a handler runs, so that Close can tell that
	// it must not wait for opMu (it may be called by that very handler).
	inHandler atomic.Bool

	mux       *Mux
	noDefault bool
	routesMu  sync.RWMutex
	routes    map[string]*Mux // by worker name
}

// NewServer creates the REP socket and binds it.
func NewServer(opts ServerOptions) (*Server, error) {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("rpc: invalid port %d", opts.Port)
	}
	port := "*"
	if opts.Port != 0 {
		port = strconv.Itoa(opts.Port)
	}
	endpoint := "tcp://" + net.JoinHostPort(host, port)
	maxPayload := opts.MaxPayload
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}

	sock, err := zmq.NewSocket(zmq.REP)
	if err != nil {
		return nil, fmt.Errorf("rpc: new REP socket: %w", err)
	}
	if err := configureServerSocket(sock, host, maxPayload, opts.Curve); err != nil {
		sock.Close()
		return nil, fmt.Errorf("rpc: server %s: %w", endpoint, err)
	}
	if err := sock.Bind(endpoint); err != nil {
		sock.Close()
		return nil, fmt.Errorf("rpc: bind %s: %w", endpoint, err)
	}
	last, err := sock.GetLastEndpoint()
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("rpc: bound endpoint of %s: %w", endpoint, err)
	}
	poller := zmq.NewPoller()
	poller.Add(sock, zmq.POLLIN)
	mux := opts.Mux
	if mux == nil {
		mux = NewMux()
	}
	return &Server{
		addr:       strings.TrimPrefix(last, "tcp://"),
		maxPayload: maxPayload,
		log:        logger,
		sock:       sock,
		poller:     poller,
		mux:        mux,
		noDefault:  opts.NoDefault,
		routes:     map[string]*Mux{},
	}, nil
}

func configureServerSocket(sock *zmq.Socket, host string, maxPayload int, curve *CurveKeyPair) error {
	// LINGER 0: replies to clients that went away must not delay Close.
	if err := sock.SetLinger(0); err != nil {
		return fmt.Errorf("set LINGER: %w", err)
	}
	if err := sock.SetMaxmsgsize(hardPayloadCap(maxPayload)); err != nil {
		return fmt.Errorf("set MAXMSGSIZE: %w", err)
	}
	if strings.Contains(host, ":") {
		if err := sock.SetIpv6(true); err != nil {
			return fmt.Errorf("set IPV6: %w", err)
		}
	}
	if curve != nil {
		if err := setServerCurve(sock, curve); err != nil {
			return err
		}
	}
	return nil
}

// hardPayloadCap is the ZMQ_MAXMSGSIZE for a given soft limit. It sits well
// above the soft limit so that ordinary oversized requests still get a typed
// payload_too_large reply, while absurd ones cannot exhaust memory.
func hardPayloadCap(maxPayload int) int64 {
	const floor = 1 << 20
	if int64(maxPayload) > math.MaxInt64/4 {
		return -1
	}
	return max(4*int64(maxPayload), floor)
}

// Addr returns the "host:port" the server is bound to.
func (s *Server) Addr() string { return s.addr }

// Socket is the REP socket, for a caller's own poller (one poller over the
// sockets of many servers, say). Only poll it, from the goroutine that
// calls HandleRequests; requests are read through HandleRequests.
func (s *Server) Socket() *zmq.Socket { return s.sock }

// Mux is the server's command table for requests that name no worker.
func (s *Server) Mux() *Mux { return s.mux }

// Route dispatches the requests that name worker to mux: one server (one
// socket, one port) can serve the workers of a whole process, and a
// request that reaches the wrong process is refused rather than answered
// by whoever listens there now. Safe for concurrent use.
func (s *Server) Route(worker string, mux *Mux) {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	s.routes[worker] = mux
}

// Unroute stops serving worker: its requests fail with unknown_worker.
func (s *Server) Unroute(worker string) {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	delete(s.routes, worker)
}

// muxFor is the command table of a request for target ("": none).
func (s *Server) muxFor(target string) (*Mux, *Error) {
	s.routesMu.RLock()
	defer s.routesMu.RUnlock()
	if target == "" {
		if s.noDefault {
			return nil, Errorf(ErrTypeUnknownWorker, "this address serves %d workers: a request must name one as its third element", len(s.routes))
		}
		return s.mux, nil
	}
	if m := s.routes[target]; m != nil {
		return m, nil
	}
	return nil, Errorf(ErrTypeUnknownWorker, "no worker %q at this address", target)
}

// HandleRequests answers the requests already queued, at most max of them
// (max <= 0: until none is queued), without waiting for more, and returns how
// many it answered. It stops early, with ctx.Err(), if ctx ends. A worker calls it between slices of its own work so that
// handlers never run concurrently with the worker.
func (s *Server) HandleRequests(ctx context.Context, max int) (int, error) {
	if !s.acquire() {
		return 0, ErrClosed
	}
	defer s.release()
	n := 0
	for max <= 0 || n < max {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if s.closing.Load() {
			return n, nil
		}
		frames, err := s.sock.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil {
			if zsock.IsEAGAIN(err) {
				return n, nil
			}
			return n, fmt.Errorf("rpc: receive request: %w", err)
		}
		if err := s.answer(ctx, frames); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// WaitRequest waits until a request is queued or a watched socket has
// input (true), timeout passes
// (false, nil), or ctx ends (false, ctx.Err()). timeout <= 0 waits for ctx
// alone. An idle worker waits here instead of spinning.
func (s *Server) WaitRequest(ctx context.Context, timeout time.Duration) (bool, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		wait := pollSlice
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return false, nil
			}
			wait = min(wait, left)
		}
		ready, err := s.poll(wait)
		if err != nil || ready {
			return ready, err
		}
	}
}

// WatchSocket makes WaitRequest also wake when sock has input, so a worker
// that owns other sockets (an inference stream, say) can sleep on all of
// them at once. Call it from the goroutine that serves; sock stays the
// caller's to read and close (UnwatchSocket it before closing).
func (s *Server) WatchSocket(sock *zmq.Socket) error {
	if !s.acquire() {
		return ErrClosed
	}
	defer s.release()
	s.poller.Add(sock, zmq.POLLIN)
	return nil
}

// UnwatchSocket undoes WatchSocket.
func (s *Server) UnwatchSocket(sock *zmq.Socket) error {
	if !s.acquire() {
		return ErrClosed
	}
	defer s.release()
	s.poller.RemoveBySocket(sock)
	return nil
}

func (s *Server) poll(wait time.Duration) (bool, error) {
	if !s.acquire() {
		return false, ErrClosed
	}
	defer s.release()
	polled, err := s.poller.Poll(roundUpMillis(wait))
	if err != nil {
		return false, fmt.Errorf("rpc: poll: %w", err)
	}
	return len(polled) > 0, nil
}

// Serve answers requests until ctx ends, then returns nil. It is a blocking
// helper for servers with nothing else to do; workers interleave
// WaitRequest and HandleRequests with their own work instead.
func (s *Server) Serve(ctx context.Context) error {
	for {
		ready, err := s.WaitRequest(ctx, 0)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !ready {
			continue
		}
		if _, err := s.HandleRequests(ctx, 0); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// Close closes the socket; pending requests are dropped. Later calls return
// nil; other methods return ErrClosed. libzmq releases the port in its I/O
// thread, so binding the same port right after Close may fail with
// EADDRINUSE for a moment.
func (s *Server) Close() error {
	s.closing.Store(true)
	if s.inHandler.Load() {
		// Possibly called by the handler itself, which runs with opMu
		// held: waiting could deadlock. Whoever holds opMu closes the
		// socket on release.
		if !s.opMu.TryLock() {
			return nil
		}
	} else {
		s.opMu.Lock()
	}
	defer s.opMu.Unlock()
	return s.closeLocked()
}

func (s *Server) closeLocked() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.sock.Close(); err != nil {
		return fmt.Errorf("rpc: close server %s: %w", s.addr, err)
	}
	return nil
}

// acquire locks opMu for socket use; false means the server is closed.
func (s *Server) acquire() bool {
	s.opMu.Lock()
	if s.closing.Load() {
		_ = s.closeLocked()
		s.opMu.Unlock()
		return false
	}
	return true
}

// release unlocks opMu and completes a Close that arrived meanwhile. If the
// TryLock fails, another goroutine holds opMu and will do the same check.
func (s *Server) release() {
	s.opMu.Unlock()
	if s.closing.Load() && s.opMu.TryLock() {
		_ = s.closeLocked()
		s.opMu.Unlock()
	}
}

// answer sends the reply to one request. A REP socket is built on ROUTER,
// which drops rather than blocks when the peer is gone or slow, so the send
// cannot hang.
func (s *Server) answer(ctx context.Context, frames [][]byte) error {
	e := getEncoder()
	defer putEncoder(e)
	s.dispatch(ctx, e, frames)
	if _, err := s.sock.SendBytes(e.buf.Bytes(), 0); err != nil {
		return fmt.Errorf("rpc: send reply: %w", err)
	}
	return nil
}

// dispatch validates a request, runs its handler, and leaves the encoded
// reply in e.
func (s *Server) dispatch(ctx context.Context, e *encoder, frames [][]byte) {
	size := 0
	for _, f := range frames {
		size += len(f)
	}
	if size > s.maxPayload {
		s.reject(e, "", Errorf(ErrTypePayloadTooLarge, "payload of %d bytes exceeds the limit of %d", size, s.maxPayload))
		return
	}
	if len(frames) != 1 {
		s.reject(e, "", Errorf(ErrTypeBadRequest, "request must be exactly one frame, got %d", len(frames)))
		return
	}
	req, rerr := decodeRequest(frames[0])
	if rerr != nil {
		s.reject(e, req.command, rerr)
		return
	}
	mux, rerr := s.muxFor(req.target)
	if rerr != nil {
		s.reject(e, req.command, rerr)
		return
	}
	mux.served.Add(1)
	h := mux.Handler(req.command)
	if h == nil {
		mux.observe("", ErrTypeUnknownCommand)
		s.reject(e, req.command, Errorf(ErrTypeUnknownCommand, "unknown command %q", req.command))
		return
	}
	if err := s.call(ctx, e, req.command, h, req.args); err != nil {
		re := wireError(err)
		mux.observe(req.command, re.Type)
		s.reject(e, req.command, re)
		return
	}
	mux.observe(req.command, "ok")
}

// call runs h and encodes its result into e. Encoding happens inside the
// recover too, since custom msgpack encoders are handler code.
func (s *Server) call(ctx context.Context, e *encoder, command string, h Handler, args Args) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("rpc: handler panicked", "command", command, "panic", r, "stack", string(debug.Stack()))
			err = Errorf(ErrTypeHandlerPanic, "handler of %q panicked: %v", command, r)
		}
	}()
	s.inHandler.Store(true)
	defer s.inHandler.Store(false)
	v, err := h(ctx, args)
	if err != nil {
		return err
	}
	if err := encodeOK(e, v); err != nil {
		return Errorf(ErrTypeHandlerError, "encode reply of %q (%T): %v", command, v, err)
	}
	return nil
}

func (s *Server) reject(e *encoder, command string, re *Error) {
	if re.Type != ErrTypeHandlerPanic { // already logged with its stack
		s.log.Debug("rpc: request failed", "command", command, "type", re.Type, "message", re.Message)
	}
	encodeError(e, re)
}

// wireError maps a handler's error to what goes on the wire: an *Error
// anywhere in the chain keeps its type (and, if wrapped, the full message),
// anything else is handler_error.
func wireError(err error) *Error {
	var re *Error
	if errors.As(err, &re) && re != nil {
		if re == err {
			return re
		}
		return &Error{Type: re.Type, Message: err.Error()}
	}
	return &Error{Type: ErrTypeHandlerError, Message: err.Error()}
}

// roundUpMillis rounds a positive wait up to whole milliseconds, zmq's poll
// resolution, so that a sub-millisecond wait does not become a busy loop.
func roundUpMillis(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
