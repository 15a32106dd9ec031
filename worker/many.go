package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// RunMany runs workers in the calling goroutine, with one poller over all
// their sockets, until every one of them has exited; ctx ending interrupts
// them all. Run is RunMany of one worker. A process that hosts many
// workers (NewHosted, rlctl worker --count) runs them here: a thousand
// idle workers cost one thread blocked in one poll, their requests arrive
// on the one socket they share, and a group request to them is answered
// by one loop that takes whatever requests are readable.
//
// Each turn answers the requests queued for the workers (at most
// Options.RequestsPerLoop per worker), then steps (one Poll if RUNNING)
// each worker that had requests or input on its own sockets, whose last
// Poll had work, or whose Deadliner's deadline came, and, once per
// IdleWait, every RUNNING worker. Each turn counts in the loop record's
// heartbeat.
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
	for _, w := range workers {
		idleWait = min(idleWait, w.opts.IdleWait)
		if !seen[w.host] {
			seen[w.host] = true
			r.hosts = append(r.hosts, w.host)
		}
	}
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
				w.exit(StateError)
			}
			r.errs = append(r.errs, err)
			r.dropExited()
		}
	}
	return errors.Join(r.errs...)
}

// runner is RunMany's state: the workers still running, which of them must
// step next, their hosts, and the one poller over all their sockets.
type runner struct {
	live   []*Worker
	due    []bool
	hosts  []*host
	errs   []error
	poller *zmq.Poller
	owner  []int // poller item -> index in live; -1: a host's server
	gens   []int // each live worker's watchGen when the poller was built
	swept  time.Time
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
		n, err := h.srv.HandleRequests(ctx, h.maxRequests)
		if err != nil && ctx.Err() == nil {
			// The server cannot go on, so neither can its workers.
			r.errs = append(r.errs, fmt.Errorf("worker host %s: serve: %w", h.loopID, err))
			for _, w := range r.live {
				if w.host == h {
					w.exit(StateError)
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
		r.poller = nil // indices moved
	}
	r.live, r.due = r.live[:k], r.due[:k]
}

// wait polls the hosts' servers and every live worker's sockets, for no
// time if a worker is busy, else for up to idleWait, and marks the workers
// with input due; once per idleWait it also marks the RUNNING ones due, as
// a worker alone would poll after its idle wait.
func (r *runner) wait(busy bool, idleWait time.Duration) error {
	if busy && !slices.Contains(r.due, false) {
		// Every worker steps next turn anyway and serve reads the
		// servers without waiting: a poll would only cost a system call
		// per turn (a busy actor turns tens of thousands of times a second).
		return nil
	}
	r.rebuild()
	timeout := idleWait
	for _, w := range r.live {
		timeout = min(timeout, w.waitFor())
	}
	if busy {
		timeout = 0
	}
	polled, err := r.poller.PollAll(timeout)
	if err != nil {
		return fmt.Errorf("worker host: poll: %w", err)
	}
	for i, p := range polled {
		if p.Events&zmq.POLLIN != 0 && r.owner[i] >= 0 {
			r.due[r.owner[i]] = true
		}
	}
	for i, w := range r.live {
		if w.deadlineDue() {
			r.due[i] = true
		}
	}
	if now := time.Now(); now.Sub(r.swept) >= idleWait {
		r.swept = now
		for i, w := range r.live {
			if w.state == StateRunning {
				r.due[i] = true
			}
		}
	}
	return nil
}

// rebuild makes the poller again if a worker's watched sockets changed or
// a worker left.
func (r *runner) rebuild() {
	if r.poller != nil && len(r.gens) == len(r.live) {
		same := true
		for i, w := range r.live {
			if r.gens[i] != w.watchGen {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	r.poller, r.owner, r.gens = zmq.NewPoller(), r.owner[:0], r.gens[:0]
	for _, h := range r.hosts {
		if h.open() {
			r.poller.Add(h.srv.Socket(), zmq.POLLIN)
			r.owner = append(r.owner, -1)
		}
	}
	for i, w := range r.live {
		for _, s := range w.watched {
			r.poller.Add(s, zmq.POLLIN)
			r.owner = append(r.owner, i)
		}
		r.gens = append(r.gens, w.watchGen)
	}
}
