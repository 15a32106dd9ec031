package replaystream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/distrl/distrl/internal/endpoint"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Errors of Client.Send; nothing was sent, try again later.
var (
	// ErrNoReplayShard: the request names a shard no replay server holds now.
	ErrNoReplayShard = errors.New("replaystream: no such replay shard")
	// ErrReplayBusy: the shard is not connected yet (or any more), or its
	// queue is full.
	ErrReplayBusy = errors.New("replaystream: replay shard not connected or its queue full; request not sent")
)

// ClientOptions configure a Client.
type ClientOptions struct {
	Repo  nameresolve.Repository
	Trial names.Trial
	Name  string // the replay stream (default "default")
	// Slack is how long after its own timeout_ms a request is given up
	// when no reply came (the server died). Default 2 s.
	Slack time.Duration
	// SendHWM bounds the requests queued per shard (default 64).
	SendHWM int
	Logger  *slog.Logger
	// Curve is the trial's key pair (--curve-keys): the socket speaks
	// CurveZMQ, and peers without the pair get nothing and send nothing.
	// nil: plaintext.
	Curve *rpc.CurveKeyPair
}

type shardConn struct {
	index int
	addr  string
	sock  *zmq.Socket
}

type inFlight struct {
	op       string
	shard    int
	deadline time.Time
}

// ClientStats are a client's counters.
type ClientStats struct {
	Sent, Replies, Expired, Late, Malformed, Backpressure int64
}

// Client talks to every replay server (shard) of a replay stream:
// one DEALER socket per shard, found and followed through name resolve.
// Requests are pipelined: Send never waits, Poll collects the replies that
// have arrived, in any order, and gives up on requests whose server did
// not answer in time (a reply with error type "timeout"). It is for one
// goroutine.
type Client struct {
	opts    ClientOptions
	log     *slog.Logger
	watch   *endpoint.Watch
	shards  map[string]*shardConn // by name-resolve key
	enc     *zsock.Encoder
	dec     *zsock.Decoder
	nextRID int64
	pending map[int64]inFlight
	rr      int
	stats   ClientStats
	version uint64 // counts the changes to the set of sockets
}

// NewClient connects to the replay servers registered now and
// follows the stream's records for more. ctx bounds the first listing.
func NewClient(ctx context.Context, opts ClientOptions) (*Client, error) {
	opts.Name = cmp.Or(opts.Name, DefaultName)
	opts.Slack = cmp.Or(opts.Slack, 2*time.Second)
	opts.SendHWM = cmp.Or(opts.SendHWM, 64)
	if opts.Repo == nil {
		return nil, errors.New("replaystream: ClientOptions.Repo is required")
	}
	log := zsock.LoggerOr(opts.Logger).With("replay", opts.Name)
	w, snap, err := endpoint.NewWatch(ctx, opts.Repo, opts.Trial.StreamPrefix(Kind, opts.Name), log)
	if err != nil {
		return nil, fmt.Errorf("replaystream: replay client: %w", err)
	}
	c := &Client{opts: opts, log: log, watch: w, shards: map[string]*shardConn{},
		enc: zsock.NewEncoder(), dec: zsock.NewDecoder(), pending: map[int64]inFlight{}}
	c.apply(snap)
	return c, nil
}

// apply opens a socket to each new shard and closes those of vanished
// ones (a restarted server at a new address gets a new socket).
func (c *Client) apply(snap map[string]string) {
	for key, sh := range c.shards {
		if snap[key] != sh.addr {
			sh.sock.Close()
			delete(c.shards, key)
			c.version++
		}
	}
	for key, addr := range snap {
		if c.shards[key] != nil {
			continue
		}
		idx, err := strconv.Atoi(path.Base(key))
		if err != nil || idx < 0 || idx > MaxShard {
			c.log.Warn("replaystream: replay record with a bad index skipped", "key", key)
			continue
		}
		o := endpoint.ConnectingOptions(0, c.opts.Curve)
		o.SendHWM = c.opts.SendHWM
		sock, err := zsock.New(zmq.DEALER, o)
		if err == nil {
			if err = sock.Connect(zsock.Endpoint(addr)); err != nil {
				sock.Close()
			}
		}
		if err != nil {
			c.log.Warn("replaystream: cannot connect to replay server", "key", key, "address", addr, "err", err)
			continue
		}
		c.shards[key] = &shardConn{index: idx, addr: addr, sock: sock}
		c.version++
	}
}

func (c *Client) sync() {
	if snap, ok := c.watch.Take(); ok {
		c.apply(snap)
	}
}

// Shards returns the indices of the replay servers known now, sorted.
func (c *Client) Shards() []int {
	c.sync()
	out := make([]int, 0, len(c.shards))
	for _, sh := range c.shards {
		out = append(out, sh.index)
	}
	slices.Sort(out)
	return out
}

func (c *Client) shard(index int) *shardConn {
	for _, sh := range c.shards {
		if sh.index == index {
			return sh
		}
	}
	return nil
}

// Send sends req to shard (-1: the next shard in turn) and returns the
// request id its reply will carry. With no shard, or the shard's queue
// full, it returns ErrNoReplayShard or ErrReplayBusy and nothing is sent.
func (c *Client) Send(shard int, req *Request) (int64, error) {
	c.sync()
	var sh *shardConn
	if shard < 0 {
		idx := c.Shards()
		if len(idx) == 0 {
			return 0, ErrNoReplayShard
		}
		c.rr++
		sh = c.shard(idx[c.rr%len(idx)])
	} else if sh = c.shard(shard); sh == nil {
		return 0, fmt.Errorf("%w: %d", ErrNoReplayShard, shard)
	}
	c.nextRID++
	req.RID = c.nextRID
	e := c.enc.Reset()
	if err := e.Encode(req); err != nil {
		return 0, fmt.Errorf("replaystream: encode replay request: %w", err)
	}
	if _, err := sh.sock.SendBytes(c.enc.Bytes(), zmq.DONTWAIT); err != nil {
		if zsock.IsEAGAIN(err) {
			c.stats.Backpressure++
			return 0, ErrReplayBusy
		}
		return 0, fmt.Errorf("replaystream: send replay request: %w", err)
	}
	c.stats.Sent++
	c.pending[req.RID] = inFlight{op: req.Op, shard: sh.index,
		deadline: time.Now().Add(time.Duration(req.TimeoutMs)*time.Millisecond + c.opts.Slack)}
	return req.RID, nil
}

// Poll returns the replies that have arrived, without blocking, and a
// "timeout" error reply for each request whose deadline passed unanswered.
// Malformed replies and replies to requests already given up are dropped
// and counted.
func (c *Client) Poll() ([]*Reply, error) {
	c.sync()
	var out []*Reply
	for _, sh := range c.shards {
		for range maxDropsPerPoll {
			frame, err := sh.sock.RecvBytes(zmq.DONTWAIT)
			if zsock.IsEAGAIN(err) {
				break
			}
			if err != nil {
				return out, fmt.Errorf("replaystream: receive replay reply: %w", err)
			}
			rep := &Reply{}
			if err := decode(c.dec, frame, rep); err != nil {
				c.stats.Malformed++
				continue
			}
			if _, ok := c.pending[rep.RID]; !ok {
				c.stats.Late++
				continue
			}
			delete(c.pending, rep.RID)
			rep.Shard = sh.index
			c.stats.Replies++
			out = append(out, rep)
		}
	}
	now := time.Now()
	for rid, p := range c.pending {
		if now.After(p.deadline) {
			delete(c.pending, rid)
			c.stats.Expired++
			out = append(out, &Reply{Op: p.op, RID: rid, Shard: p.shard,
				Error: &rpc.Error{Type: "timeout", Message: fmt.Sprintf("no reply from replay shard %d", p.shard)}})
		}
	}
	return out, nil
}

// Pending is the number of requests sent and not yet answered.
func (c *Client) Pending() int { return len(c.pending) }

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats { return c.stats }

// Connections is the number of shards the client has a socket to now. It
// does not follow the records (Shards does) and allocates nothing.
func (c *Client) Connections() int { return len(c.shards) }

// Sockets are the shards' sockets now. They change as shards come and go
// (a vanished shard's socket is closed at the next Send, Poll or Shards),
// so a caller that polls them must ask again after each of those calls.
func (c *Client) Sockets() []*zmq.Socket {
	out := make([]*zmq.Socket, 0, len(c.shards))
	for _, sh := range c.shards {
		out = append(out, sh.sock)
	}
	return out
}

// SocketsVersion changes whenever the set of sockets does (the worker
// loop's worker.SocketSetter).
func (c *Client) SocketsVersion() uint64 { return c.version }

// Close stops following the records and closes every socket.
func (c *Client) Close() error {
	c.watch.Close()
	var errs []error
	for key, sh := range c.shards {
		errs = append(errs, sh.sock.Close())
		delete(c.shards, key)
	}
	return errors.Join(errs...)
}
