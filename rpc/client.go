package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	zmq "github.com/pebbe/zmq4"
)

// ClientOptions configure Dial.
type ClientOptions struct {
	// Curve, when set, speaks CURVE to a server with that public key;
	// nil means plaintext.
	Curve *CurveClientKeys
}

// clientSeq numbers clients so that Do can lock them in a consistent order.
var clientSeq atomic.Uint64

// Client sends requests to one Server over a DEALER socket. It is safe for
// concurrent use; requests on one Client are serialized.
//
// Each request is sent as [id, "", payload]; the server's REP socket echoes
// the id back, so a reply is matched to its request and a late reply to an
// abandoned one is dropped. A request that times out or is cancelled also
// discards the socket, so it can never reach a server that comes up later at
// that address.
type Client struct {
	seq      uint64
	addr     string
	endpoint string
	ipv6     bool
	curve    *CurveClientKeys

	// sem is a one-token semaphore guarding the fields below; a channel
	// rather than a sync.Mutex so that waiting for a busy client respects
	// the caller's ctx.
	sem    chan struct{}
	sock   *zmq.Socket // nil after a failed reopen; reopened on next use
	poller *zmq.Poller
	lastID uint64
	closed bool
}

// Dial returns a Client for the server at address ("host:port" or
// "tcp://host:port"). Like zmq it connects lazily: Dial does not block and
// succeeds whether or not a server is listening yet.
func Dial(address string, opts ClientOptions) (*Client, error) {
	addr := strings.TrimPrefix(address, "tcp://")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("rpc: dial %q: %w", address, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("rpc: dial %q: invalid port %q", address, port)
	}
	if host == "" {
		return nil, fmt.Errorf("rpc: dial %q: missing host", address)
	}
	var curve *CurveClientKeys
	if opts.Curve != nil {
		k := *opts.Curve
		curve = &k
	}
	c := &Client{
		seq:      clientSeq.Add(1),
		addr:     addr,
		endpoint: "tcp://" + addr,
		ipv6:     strings.Contains(host, ":"),
		curve:    curve,
		sem:      make(chan struct{}, 1),
	}
	if err := c.openLocked(); err != nil {
		return nil, err
	}
	return c, nil
}

// Address returns the server's "host:port".
func (c *Client) Address() string { return c.addr }

// Request sends command with kwargs (any value that encodes as a msgpack
// map; nil means no arguments) and decodes the "ok" value of the reply into
// reply: a pointer, a *msgpack.RawMessage, or nil to discard it.
//
// A remote error is returned as *Error. If ctx ends first, the error wraps
// ctx.Err() and the Client stays usable.
func (c *Client) Request(ctx context.Context, command string, kwargs any, reply any) error {
	return c.RequestTo(ctx, "", command, kwargs, reply)
}

// RequestTo is Request for the named worker of a server that serves
// several (Server.Route); "" names none, as Request.
func (c *Client) RequestTo(ctx context.Context, worker, command string, kwargs any, reply any) error {
	return c.request(ctx, worker, command, kwargs, reply, nil)
}

// Recheck is how a caller that resolved the server's address from a cache
// finds out, while it waits for a reply, that the address was stale.
type Recheck struct {
	// After is how long a reply may take before Still is asked (once).
	After time.Duration
	// Still reports whether the server at this address is still the one
	// the request is for. false abandons the request: RequestToRecheck
	// returns ErrAbandoned, and the socket is discarded, so the request
	// can never be delivered later.
	Still func() bool
}

// ErrAbandoned: a request was given up because Recheck.Still said its
// server's address no longer holds the worker; the request was not
// answered, and will not be delivered there.
var ErrAbandoned = errors.New("rpc: request abandoned: the address is no longer the worker's")

// RequestToRecheck is RequestTo that asks rc.Still when no reply has come
// within rc.After, so that a request sent to a cached address that went
// stale (a worker restarted elsewhere: nothing answers at the old one)
// is abandoned at once rather than at ctx's end.
func (c *Client) RequestToRecheck(ctx context.Context, worker, command string, kwargs any, reply any, rc Recheck) error {
	return c.request(ctx, worker, command, kwargs, reply, &rc)
}

func (c *Client) request(ctx context.Context, worker, command string, kwargs any, reply any, rc *Recheck) error {
	e := getEncoder()
	defer putEncoder(e)
	if err := encodeRequest(e, worker, command, kwargs); err != nil {
		return err
	}

	if err := c.lock(ctx); err != nil {
		return c.wrap(command, err)
	}
	defer c.unlock()
	// A failed send left nothing queued: the socket can stay.
	id, err := c.sendLocked(ctx, e.buf.Bytes())
	if err != nil {
		return c.wrap(command, err)
	}
	payload, err := c.awaitLocked(ctx, id, rc)
	if err != nil {
		c.resetLocked()
		return c.wrap(command, err)
	}
	return decodeReply(payload, reply)
}

// Close closes the socket, dropping any unsent request. Later calls return
// nil; Request returns ErrClosed.
func (c *Client) Close() error {
	// Waits for a request in progress, which its own ctx bounds.
	_ = c.lock(context.Background())
	defer c.unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.closeSocketLocked()
}

// lock takes c's semaphore, or fails with ctx's error.
func (c *Client) lock(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) unlock() { <-c.sem }

func (c *Client) openLocked() error {
	sock, err := zmq.NewSocket(zmq.DEALER)
	if err != nil {
		return fmt.Errorf("rpc: new DEALER socket: %w", err)
	}
	if err := c.configure(sock); err != nil {
		sock.Close()
		return fmt.Errorf("rpc: client of %s: %w", c.addr, err)
	}
	poller := zmq.NewPoller()
	poller.Add(sock, zmq.POLLIN)
	c.sock, c.poller = sock, poller
	return nil
}

func (c *Client) configure(sock *zmq.Socket) error {
	// LINGER 0: Close must never wait for unsent requests.
	if err := sock.SetLinger(0); err != nil {
		return fmt.Errorf("set LINGER: %w", err)
	}
	if c.ipv6 {
		if err := sock.SetIpv6(true); err != nil {
			return fmt.Errorf("set IPV6: %w", err)
		}
	}
	if c.curve != nil {
		if err := setClientCurve(sock, c.curve); err != nil {
			return err
		}
	}
	if err := sock.Connect(c.endpoint); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	return nil
}

func (c *Client) closeSocketLocked() error {
	if c.sock == nil {
		return nil
	}
	err := c.sock.Close()
	c.sock, c.poller = nil, nil
	if err != nil {
		return fmt.Errorf("rpc: close client of %s: %w", c.addr, err)
	}
	return nil
}

// resetLocked replaces the socket so that a request that may still be
// queued or in flight is dropped along with any reply to it. A failed reopen
// is reported by the next request.
func (c *Client) resetLocked() {
	if c.closed {
		return
	}
	_ = c.closeSocketLocked()
	_ = c.openLocked()
}

func (c *Client) wrap(command string, err error) error {
	return fmt.Errorf("rpc: %s to %s: %w", command, c.addr, err)
}

// sendLocked sends one request and returns its id.
func (c *Client) sendLocked(ctx context.Context, payload []byte) (uint64, error) {
	if c.closed {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if c.sock == nil {
		if err := c.openLocked(); err != nil {
			return 0, err
		}
	}
	c.lastID++
	id := c.lastID
	var idFrame [8]byte
	binary.BigEndian.PutUint64(idFrame[:], id)
	for {
		// DEALER queues while disconnected, so this only fails with
		// EAGAIN once the high-water mark is reached. A multipart
		// message is accepted or refused whole.
		_, err := c.sock.SendMessageDontwait(idFrame[:], "", payload)
		if err == nil {
			return id, nil
		}
		if !zsock.IsEAGAIN(err) {
			return 0, fmt.Errorf("send: %w", err)
		}
		wait, err := pollWait(ctx)
		if err != nil {
			return 0, err
		}
		if _, err := pollOut(c.sock, wait); err != nil {
			return 0, err
		}
	}
}

// awaitLocked waits for the reply to request id, dropping stale replies.
func (c *Client) awaitLocked(ctx context.Context, id uint64, rc *Recheck) ([]byte, error) {
	var recheckAt time.Time
	if rc != nil {
		recheckAt = time.Now().Add(rc.After)
	}
	for {
		wait, err := pollWait(ctx)
		if err != nil {
			return nil, err
		}
		if !recheckAt.IsZero() {
			left := time.Until(recheckAt)
			if left <= 0 {
				recheckAt = time.Time{} // once
				if !rc.Still() {
					return nil, ErrAbandoned
				}
				continue
			}
			wait = min(wait, roundUpMillis(left))
		}
		polled, err := c.poller.Poll(wait)
		if err != nil {
			return nil, fmt.Errorf("poll: %w", err)
		}
		if len(polled) == 0 {
			continue
		}
		for {
			frames, err := c.sock.RecvMessageBytes(zmq.DONTWAIT)
			if zsock.IsEAGAIN(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("receive: %w", err)
			}
			if got, payload, ok := parseReply(frames); ok && got == id {
				return payload, nil
			}
		}
	}
}

// parseReply splits a reply [id, "", payload] as seen by a DEALER.
func parseReply(frames [][]byte) (id uint64, payload []byte, ok bool) {
	if len(frames) != 3 || len(frames[0]) != 8 || len(frames[1]) != 0 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(frames[0]), frames[2], true
}

// pollWait returns how long the next poll may wait: until ctx's deadline,
// at most pollSlice so that cancellation is noticed. It returns ctx's error
// (DeadlineExceeded once the deadline passed, even if ctx's timer has not
// fired yet).
func pollWait(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	wait := pollSlice
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return 0, context.DeadlineExceeded
		}
		wait = min(wait, left)
	}
	return roundUpMillis(wait), nil
}

func pollOut(sock *zmq.Socket, wait time.Duration) (bool, error) {
	p := zmq.NewPoller()
	p.Add(sock, zmq.POLLOUT)
	polled, err := p.Poll(wait)
	if err != nil {
		return false, fmt.Errorf("poll: %w", err)
	}
	return len(polled) > 0, nil
}
