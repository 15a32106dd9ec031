package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// RunMany runs workers in the calling goroutine, with one poller over all
// their sockets, until every one of them has exited; ctx ending interrupts
// them all. It is Run for a process that hosts many workers (rlctl worker
// --count): each worker keeps its own server, records and lifecycle, but a
// thousand idle workers cost one thread blocked in one poll rather than a
// thousand, and a group request to them is answered by one loop that takes
// whatever requests are readable. A worker steps (requests, then one Poll
// if RUNNING) when one of its sockets is readable, while its last Poll had
// work, and, if RUNNING or its heartbeat is due, once per IdleWait, as
// under Run.
//
// The error joins the errors Run would have returned for each worker.
func RunMany(ctx context.Context, workers []*Worker) error {
	h := &host{live: append([]*Worker(nil), workers...)}
	h.due = make([]bool, len(h.live))
	for i := range h.due {
		h.due[i] = true
	}
	idleWait := DefaultIdleWait
	for _, w := range workers {
		idleWait = min(idleWait, w.opts.IdleWait)
	}
	for len(h.live) > 0 {
		busy := false
		for i, w := range h.live {
			if !h.due[i] && ctx.Err() == nil {
				continue
			}
			h.due[i] = false
			idle, err := w.step(ctx)
			if err != nil {
				h.errs = append(h.errs, err)
				w.exit(StateError)
				continue
			}
			if !idle && !w.exiting {
				h.due[i], busy = true, true
			}
		}
		h.dropExited()
		if len(h.live) == 0 {
			break
		}
		if err := h.wait(busy, idleWait); err != nil {
			for _, w := range h.live {
				w.exit(StateError)
			}
			h.errs = append(h.errs, err)
			h.dropExited()
		}
	}
	return errors.Join(h.errs...)
}

// host is RunMany's state: the workers still running, which of them must
// step next, and the one poller over their sockets.
type host struct {
	live   []*Worker
	due    []bool
	errs   []error
	poller *zmq.Poller
	owner  []int // poller item -> index in live
	gens   []int // each live worker's watchGen when the poller was built
	swept  time.Time
}

// dropExited shuts down the workers that exited and forgets them.
func (h *host) dropExited() {
	k := 0
	for i, w := range h.live {
		if !w.exiting {
			h.live[k], h.due[k] = w, h.due[i]
			k++
			continue
		}
		w.shutdown()
		if err := w.result(); err != nil {
			h.errs = append(h.errs, err)
		}
		h.poller = nil // indices moved
	}
	h.live, h.due = h.live[:k], h.due[:k]
}

// wait polls every live worker's sockets, for no time if a worker is busy,
// else for up to idleWait, and marks the workers with input due; once per
// idleWait it also marks the RUNNING ones due, as Run polls them after its
// idle wait, and those whose heartbeat is due.
func (h *host) wait(busy bool, idleWait time.Duration) error {
	h.rebuild()
	timeout := idleWait
	for _, w := range h.live {
		timeout = min(timeout, w.waitFor())
	}
	if busy {
		timeout = 0
	}
	polled, err := h.poller.PollAll(timeout)
	if err != nil {
		return fmt.Errorf("worker host: poll: %w", err)
	}
	for i, p := range polled {
		if p.Events&zmq.POLLIN != 0 {
			h.due[h.owner[i]] = true
		}
	}
	for i, w := range h.live {
		if w.deadlineDue() {
			h.due[i] = true
		}
	}
	if now := time.Now(); now.Sub(h.swept) >= idleWait {
		h.swept = now
		for i, w := range h.live {
			if w.state == StateRunning || now.Sub(w.beat) >= w.opts.Heartbeat {
				h.due[i] = true
			}
		}
	}
	return nil
}

// rebuild makes the poller again if a worker's watched sockets changed or
// a worker left.
func (h *host) rebuild() {
	if h.poller != nil && len(h.gens) == len(h.live) {
		same := true
		for i, w := range h.live {
			if h.gens[i] != w.watchGen {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	h.poller, h.owner, h.gens = zmq.NewPoller(), h.owner[:0], h.gens[:0]
	for i, w := range h.live {
		h.poller.Add(w.srv.Socket(), zmq.POLLIN)
		h.owner = append(h.owner, i)
		for _, s := range w.watched {
			h.poller.Add(s, zmq.POLLIN)
			h.owner = append(h.owner, i)
		}
		h.gens = append(h.gens, w.watchGen)
	}
}
