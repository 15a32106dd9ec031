package rpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distrl/distrl/internal/zsock"
	zmq "github.com/pebbe/zmq4"
)

// Call is one request of a Do batch. Client, Command, Kwargs and Reply are
// inputs as in Client.Request; Err is the outcome.
type Call struct {
	Client *Client
	// Target names the worker the call is for, where the server serves
	// several (Server.Route); "" names none.
	Target  string
	Command string
	Kwargs  any
	Reply   any
	Err     error
}

// doWindow bounds the calls in flight on one client during Do. The rest
// wait their turn: a peer's queues hold about a thousand messages each way
// (ZMQ's high-water marks), and a REP server drops a reply it cannot
// queue, so thousands of calls to one server must not be sent at once.
const doWindow = 256

// errNoClient is the Err of a Call without a Client.
var errNoClient = errors.New("rpc: call has no client")

// doClient is the state of one distinct client during Do: its calls not
// sent yet, and those waiting for their replies.
type doClient struct {
	c       *Client
	unsent  []*Call
	waiting map[uint64]*Call
}

// Do sends every call at once and waits for all replies under ctx, in the
// calling goroutine with one zmq poll over all the clients' sockets. Each
// call's result lands in its Reply and Err; a call still waiting when ctx
// ends gets an error wrapping ctx.Err(). Calls that share a Client are sent
// in order on it.
//
// Do holds every involved Client for its duration; Requests on them wait.
func Do(ctx context.Context, calls []*Call) {
	clients := groupCalls(calls)
	// A consistent lock order keeps concurrent Do calls over overlapping
	// clients from deadlocking.
	for i, dc := range clients {
		if err := dc.c.lock(ctx); err != nil {
			for _, held := range clients[:i] {
				held.c.unlock()
			}
			failAll(calls, err)
			return
		}
	}
	defer func() {
		for _, dc := range clients {
			dc.c.unlock()
		}
	}()

	byClient := make(map[*Client]*doClient, len(clients))
	for _, dc := range clients {
		byClient[dc.c] = dc
	}
	for _, call := range calls {
		if call != nil && call.Client != nil {
			dc := byClient[call.Client]
			dc.unsent = append(dc.unsent, call)
		}
	}
	e := getEncoder()
	defer putEncoder(e)
	for _, dc := range clients {
		dc.send(ctx, e)
	}
	collect(ctx, clients, e)
}

// send sends dc's unsent calls while fewer than doWindow are waiting.
func (dc *doClient) send(ctx context.Context, e *encoder) {
	for len(dc.unsent) > 0 && len(dc.waiting) < doWindow {
		call := dc.unsent[0]
		dc.unsent = dc.unsent[1:]
		if err := encodeRequest(e, call.Target, call.Command, call.Kwargs); err != nil {
			call.Err = err
			continue
		}
		// A failed send left nothing queued; earlier calls on the same
		// socket are still waiting, so it must not be reset here.
		id, err := dc.c.sendLocked(ctx, e.buf.Bytes())
		if err != nil {
			call.Err = dc.c.wrap(call.Command, err)
			continue
		}
		dc.waiting[id] = call
	}
}

// groupCalls resets each call's Err and returns the distinct clients, with
// empty waiting sets, sorted by lock order.
func groupCalls(calls []*Call) []*doClient {
	var clients []*doClient
	seen := make(map[*Client]bool)
	for _, call := range calls {
		if call == nil {
			continue
		}
		call.Err = nil
		if call.Client == nil {
			call.Err = errNoClient
			continue
		}
		if !seen[call.Client] {
			seen[call.Client] = true
			clients = append(clients, &doClient{c: call.Client, waiting: make(map[uint64]*Call)})
		}
	}
	slices.SortFunc(clients, func(a, b *doClient) int { return cmp.Compare(a.c.seq, b.c.seq) })
	return clients
}

// collect receives replies until every waiting call has one or ctx ends.
// A zmq poll costs time in the number of sockets it watches, and replies
// from many servers trickle in over many polls, so the poller is rebuilt
// with only the sockets still waiting whenever they are down to half: a
// group of thousands costs a few full polls rather than one per reply.
func collect(ctx context.Context, clients []*doClient, e *encoder) {
	var poller *zmq.Poller
	bySocket := make(map[*zmq.Socket]*doClient, len(clients))
	watched := 0
	rebuild := func() {
		poller, watched = zmq.NewPoller(), 0
		clear(bySocket)
		for _, dc := range clients {
			if len(dc.waiting) > 0 {
				poller.Add(dc.c.sock, zmq.POLLIN)
				bySocket[dc.c.sock] = dc
				watched++
			}
		}
	}
	rebuild()
	pending := 0
	for _, dc := range clients {
		pending += len(dc.waiting) + len(dc.unsent)
	}
	for pending > 0 {
		wait, err := pollWait(ctx)
		if err != nil {
			failWaiting(clients, err)
			return
		}
		polled, err := poller.Poll(wait)
		if err != nil {
			failWaiting(clients, fmt.Errorf("poll: %w", err))
			return
		}
		done, failed := 0, false
		for _, p := range polled {
			dc := bySocket[p.Socket]
			before := len(dc.waiting) + len(dc.unsent)
			if err := dc.receive(); err != nil {
				dc.fail(err)
				failed = true // its socket was replaced: the poller must drop it
			} else {
				dc.send(ctx, e)
			}
			pending -= before - len(dc.waiting) - len(dc.unsent)
			if len(dc.waiting) == 0 {
				done++
			}
		}
		if pending > 0 && (failed || done > 0 && countWaiting(clients) <= watched/2) {
			rebuild()
		}
	}
}

// countWaiting is the number of clients with calls still waiting.
func countWaiting(clients []*doClient) int {
	n := 0
	for _, dc := range clients {
		if len(dc.waiting) > 0 {
			n++
		}
	}
	return n
}

// receive drains dc's socket and completes the calls whose replies arrived.
func (dc *doClient) receive() error {
	for len(dc.waiting) > 0 {
		frames, err := dc.c.sock.RecvMessageBytes(zmq.DONTWAIT)
		if zsock.IsEAGAIN(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		id, payload, ok := parseReply(frames)
		call := dc.waiting[id]
		if !ok || call == nil {
			continue // stale
		}
		delete(dc.waiting, id)
		call.Err = decodeReply(payload, call.Reply)
	}
	return nil
}

// fail ends dc's calls, sent or not, with err and replaces its socket.
func (dc *doClient) fail(err error) {
	for id, call := range dc.waiting {
		call.Err = dc.c.wrap(call.Command, err)
		delete(dc.waiting, id)
	}
	for _, call := range dc.unsent {
		call.Err = dc.c.wrap(call.Command, err)
	}
	dc.unsent = nil
	dc.c.resetLocked()
}

// failAll fails every call that has a client with err.
func failAll(calls []*Call, err error) {
	for _, call := range calls {
		if call != nil && call.Client != nil {
			call.Err = call.Client.wrap(call.Command, err)
		}
	}
}

func failWaiting(clients []*doClient, err error) {
	for _, dc := range clients {
		if len(dc.waiting)+len(dc.unsent) > 0 {
			dc.fail(err)
		}
	}
}
