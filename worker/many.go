package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	zmq "github.com/pebbe/zmq4"
	"golang.org/x/sys/unix"

	"github.com/distrl/distrl/worker/member"
)

// RunMany runs workers in the calling goroutine, with one wait (poll(2))
// over all their sockets and descriptors, until every one of them has
// exited; ctx ending interrupts them all. Run is RunMany of one worker. A
// process that hosts many workers (NewHosted, rlctl worker --count) runs
// them here: a thousand idle workers cost one thread blocked in one poll,
// their requests arrive on the one socket they share, and a group request
// to them is answered by one loop that takes whatever requests are
// readable.
//
// Each turn answers the requests queued for the workers (at most
// Options.RequestsPerLoop per worker), then steps (one Poll if RUNNING)
// each worker that had requests or input on its own sockets or descriptors
// (SocketOwner, FdWaiter), whose last Poll had work, or whose Deadliner's
// deadline came, and, once per IdleWait, every RUNNING worker. Each turn
// counts in the loop record's heartbeat.
//
// The error joins the errors Run would have returned for each worker.
func RunMany(ctx context.Context, workers []*Worker) error {
	r := &runner{live: append([]*Worker(nil), workers...)}
	r.due = make([]bool, len(r.live))
	for i := range r.due {
		r.due[i] = true
	}
	idleWait := DefaultIdleWait
	seen := map[*host]bool{}
	for i, w := range workers {
		idleWait = min(idleWait, w.opts.IdleWait)
		if i == 0 || w.opts.SpinWait < r.spin.max {
			r.spin.max = w.opts.SpinWait // the shortest; negative: never
		}
		if !seen[w.host] {
			seen[w.host] = true
			r.hosts = append(r.hosts, w.host)
		}
	}
	r.spin.avg = spinWaitCap * r.spin.max // as after an idle spell
	for len(r.live) > 0 {
		busy := r.serve(ctx)
		for i, w := range r.live {
			if !r.due[i] && ctx.Err() == nil {
				continue
			}
			r.due[i] = false
			if !w.step(ctx) && !w.exiting {
				r.due[i], busy = true, true
			}
		}
		r.dropExited()
		if len(r.live) == 0 {
			break
		}
		if err := r.wait(busy, idleWait); err != nil {
			for _, w := range r.live {
				w.exit(member.StateError)
			}
			r.errs = append(r.errs, err)
			r.dropExited()
		}
	}
	return errors.Join(r.errs...)
}

// runner is RunMany's state: the workers still running, which of them must
// step next, their hosts, and the descriptors its wait sleeps on.
type runner struct {
	live  []*Worker
	due   []bool
	hosts []*host
	errs  []error
	// The wait's items: pfds[i] is socks[i]'s ZMQ_FD, or, where socks[i]
	// is nil, an FdWaiter's descriptor; owner[i] is its worker's index in
	// live, or -1-h for the server of hosts[h] (serverOf). built is false
	// when they must be made again (a worker left); gens holds each live
	// worker's watchGen when they were made.
	pfds  []unix.PollFd
	socks []*zmq.Socket
	owner []int
	gens  []int
	built bool
	swept time.Time
	// memWaiters are the live workers that are MemoryWaiters and watched
	// (RUNNING); spin decides how long the wait looks for their input.
	memWaiters []int
	spin       spinner
	memFound   bool // the last look found input in memory
}

// serve turns each host's loop (its heartbeat) and answers the requests
// queued on its server, marking the workers that had some due. busy means
// requests were answered: more may be queued.
func (r *runner) serve(ctx context.Context) (busy bool) {
	now := time.Now()
	for _, h := range r.hosts {
		if !h.open() {
			continue // every worker of h has shut down
		}
		h.turn(now)
		if !h.unread && now.Sub(h.readAt) < serverReadEvery {
			continue
		}
		n, err := h.srv.HandleRequests(ctx, h.maxRequests)
		h.unread, h.readAt = n > 0, now // a full slice may have left more
		if err != nil && ctx.Err() == nil {
			// The server cannot go on, so neither can its workers.
			r.errs = append(r.errs, fmt.Errorf("worker host %s: serve: %w", h.loopID, err))
			for _, w := range r.live {
				if w.host == h {
					w.exit(member.StateError)
				}
			}
		}
		busy = busy || n > 0
	}
	if busy {
		for i, w := range r.live {
			if w.requested() {
				r.due[i] = true
			}
		}
	}
	return busy
}

// dropExited shuts down the workers that exited and forgets them.
func (r *runner) dropExited() {
	k := 0
	for i, w := range r.live {
		if !w.exiting {
			r.live[k], r.due[k] = w, r.due[i]
			k++
			continue
		}
		w.shutdown()
		if err := w.result(); err != nil {
			r.errs = append(r.errs, err)
		}
		r.built = false // indices moved
	}
	r.live, r.due = r.live[:k], r.due[:k]
}

// wait sleeps on the hosts' servers and every live worker's sockets and
// descriptors, for no time if a worker is busy, else for up to idleWait, and
// marks the workers with input due; once per idleWait it also marks the
// RUNNING ones due, as a worker alone would poll after its idle wait.
func (r *runner) wait(busy bool, idleWait time.Duration) error {
	if busy && !slices.Contains(r.due, false) {
		// Every worker steps next turn anyway and serve reads the
		// servers without waiting: a poll would only cost a system call
		// per turn (a busy actor turns tens of thousands of times a second).
		return nil
	}
	if err := r.rebuild(); err != nil {
		return err
	}
	timeout, now := idleWait, time.Now()
	for _, w := range r.live {
		timeout = min(timeout, w.waitFor(now))
	}
	if !busy && len(r.memWaiters) > 0 {
		// Look before the sockets' events are read and the FdWaiters
		// armed: a look that finds its input skips both. Input left
		// queued on a socket without a fresh signal (a Poll that read a
		// bounded slice and reported no work) is found after the look,
		// at most SpinWait later.
		//
		// Every wait counts in the spinner's average, looked or not: a
		// loop that stopped looking starts again when waits get short.
		defer func(began time.Time) { r.spin.note(time.Since(began)) }(now)
		if budget := min(r.spin.budget(), timeout); budget > 0 {
			if r.spin.look(now, budget, r.lookOnce) && r.memFound {
				r.woke(idleWait)
				return nil
			}
		}
	}
	ready, err := r.socketInput()
	if err != nil {
		return err
	}
	if r.armWaiters() {
		ready = true
	}
	if busy || ready {
		timeout = 0
	}
	if err := r.poll(timeout); err != nil {
		return err
	}
	r.woke(idleWait)
	return nil
}

// woke marks due, after a wait, the workers whose deadline came and, once
// per idleWait, every RUNNING one.
func (r *runner) woke(idleWait time.Duration) {
	now := time.Now()
	for i, w := range r.live {
		if w.deadlineDue(now) {
			r.due[i] = true
		}
	}
	if now.Sub(r.swept) >= idleWait {
		r.swept = now
		for i, w := range r.live {
			if w.state == member.StateRunning {
				r.due[i] = true
			}
		}
	}
}

// lookFdsEvery is how many looks in memory go by between two looks at the
// wait's descriptors (a poll(2) that does not sleep): input that comes over
// ZeroMQ (a request, a reply from a policy worker on another node) or a
// doorbell ends a look within that many yields, some tens of microseconds,
// not at its end. Every 8 cost 1 actor x 8 environments 4% of its steps/s.
const lookFdsEvery = 32

// lookOnce is look number turn (from 1) of the spinner: it marks the
// MemoryWaiters with input in memory due (memFound), and ends the look
// without them when none has a peer in memory or, every lookFdsEvery
// looks, when a descriptor of the wait is readable.
func (r *runner) lookOnce(turn int) bool {
	r.memFound = false
	peers := false
	for _, i := range r.memWaiters {
		if r.due[i] {
			continue
		}
		w := r.live[i]
		ready, attached := w.inputReady()
		peers = peers || attached
		if ready {
			r.due[i], r.memFound = true, true
			w.stats.spunWaits++
		}
	}
	if r.memFound || !peers {
		return true
	}
	if turn%lookFdsEvery == 0 {
		n, err := unix.Poll(r.pfds, 0)
		return err == nil && n > 0
	}
	return false
}

// socketInput looks, before the wait, for input that the wait would not
// see, and marks its workers due; true means there is some, so the wait
// must not sleep. ZMQ_FD is edge-triggered: it signals that a socket's
// state changed, not that input is queued, so a socket whose input was
// left unread (a Poll reads a bounded slice) would never wake it. Reading
// ZMQ_EVENTS also rearms the descriptor, so a socket that signalled
// without input (a connection, a reply sent) does not wake the wait again.
// Workers already due step anyway: their sockets are read then.
func (r *runner) socketInput() (bool, error) {
	ready := false
	for i, s := range r.socks {
		o := r.owner[i]
		if s == nil || o >= 0 && r.due[o] {
			continue
		}
		in, err := hasInput(s)
		if err != nil {
			return false, err
		}
		if in {
			ready = true
			if o >= 0 {
				r.due[o] = true
			} else {
				r.hosts[serverOf(o)].unread = true
			}
		}
	}
	return ready, nil
}

// armWaiters tells each FdWaiter that its worker sleeps, so that its peers
// ring; true (and the worker due) where input is there already.
func (r *runner) armWaiters() bool {
	ready := false
	for i, w := range r.live {
		if !r.due[i] && w.watched != nil && w.state == member.StateRunning && !w.prepareWait() {
			r.due[i], ready = true, true
		}
	}
	return ready
}

// poll waits up to timeout for one of the items to be readable and marks
// the workers with input due. A signal cutting the wait short resumes it
// for the time left.
func (r *runner) poll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := unix.Poll(r.pfds, ceilMillis(timeout))
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("worker host: poll: %w", err)
		}
		timeout = max(time.Until(deadline), 0)
	}
	now := time.Now()
	for i, p := range r.pfds {
		o := r.owner[i]
		if o < 0 {
			// socketInput looked at the server's events before the wait, and a
			// request that came since has signalled its ZMQ_FD: without a
			// signal the server is known to be empty now.
			h := r.hosts[serverOf(o)]
			if p.Revents == 0 {
				h.readAt = now
				continue
			}
			in, err := hasInput(r.socks[i])
			if err != nil {
				return err
			}
			h.unread = h.unread || in
			continue
		}
		// A due worker's input is read when it steps.
		if p.Revents == 0 || r.due[o] {
			continue
		}
		if s := r.socks[i]; s != nil {
			// A readable ZMQ_FD only says: look at the events.
			in, err := hasInput(s)
			if err != nil {
				return err
			}
			if in {
				r.due[o] = true
			}
			continue
		}
		// A descriptor that is readable, or failed or hung up (which
		// the worker's Poll has to see): the loop leaves it to Poll to
		// drain, so only the owner's Poll can quiet it.
		r.due[o] = true
	}
	return nil
}

// serverOf is the index in hosts of the host whose server is the wait's
// item of owner o < 0.
func serverOf(o int) int { return -1 - o }

// serverReadEvery is how often a loop that does not wait (its workers are
// busy) reads its servers when nothing says a request is there: a read
// that finds none costs libzmq three calls (system calls of 1.2-1.7 us
// each on the development VM), a tenth of a busy actor's CPU when it was
// made every turn and 4% of a policy worker's at every 250 us. A control
// request waits at most this long for a busy loop; a waiting loop wakes
// for it at once.
const serverReadEvery = time.Millisecond

// hasInput reads a socket's ZMQ_EVENTS (which also rearms its ZMQ_FD).
func hasInput(s *zmq.Socket) (bool, error) {
	ev, err := s.GetEvents()
	if err != nil {
		return false, fmt.Errorf("worker host: socket events: %w", err)
	}
	return ev&zmq.POLLIN != 0, nil
}

// ceilMillis is d in milliseconds for poll(2), rounded up: a wait of less
// than a millisecond rounded down to 0 would make the loop spin until it
// is over.
func ceilMillis(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(min((d+time.Millisecond-1)/time.Millisecond, math.MaxInt32))
}

// rebuild makes the wait's items again if a worker's watched sockets or
// descriptors changed or a worker left.
func (r *runner) rebuild() error {
	if r.built && len(r.gens) == len(r.live) {
		same := true
		for i, w := range r.live {
			if r.gens[i] != w.watchGen {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	r.built = false
	r.pfds, r.socks, r.owner, r.gens = r.pfds[:0], r.socks[:0], r.owner[:0], r.gens[:0]
	r.memWaiters = r.memWaiters[:0]
	add := func(s *zmq.Socket, fd, owner int) {
		r.pfds = append(r.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		r.socks = append(r.socks, s)
		r.owner = append(r.owner, owner)
	}
	addSocket := func(s *zmq.Socket, owner int) error {
		fd, err := s.GetFd()
		if err != nil {
			return fmt.Errorf("worker host: socket descriptor: %w", err)
		}
		add(s, fd, owner)
		return nil
	}
	for hi, h := range r.hosts {
		if h.open() {
			if err := addSocket(h.srv.Socket(), -1-hi); err != nil {
				return err
			}
		}
	}
	for i, w := range r.live {
		for _, s := range w.watched {
			if err := addSocket(s, i); err != nil {
				return err
			}
		}
		for _, fd := range w.watchedFd {
			add(nil, fd, i)
		}
		if _, ok := w.impl.(MemoryWaiter); ok && w.watched != nil {
			r.memWaiters = append(r.memWaiters, i)
		}
		r.gens = append(r.gens, w.watchGen)
	}
	r.built = true
	return nil
}
