package offload

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

var (
	// ErrBusy: Start was called while a function still runs or its result
	// has not been collected.
	ErrBusy = errors.New("offload: a job is running")
	// ErrPanicked wraps the error of a function that panicked, with the
	// panic's value and stack.
	ErrPanicked = errors.New("offload: job panicked")
	// ErrClosed: the Job was closed.
	ErrClosed = errors.New("offload: closed")
)

// Result is what a job's function returned.
type Result[T any] struct {
	Value T
	Err   error
}

// Job runs functions returning T on a goroutine of their own, one at a
// time. Its methods are for one goroutine, the owner's; only the function
// runs on another.
type Job[T any] struct {
	fd      int // eventfd, readable from a finish until Done collects it
	done    chan Result[T]
	running bool // started and not collected
}

// New makes a Job and its eventfd.
func New[T any]() (*Job[T], error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("offload: eventfd: %w", err)
	}
	return &Job[T]{fd: fd, done: make(chan Result[T], 1)}, nil
}

// Fd is the descriptor that is readable while a finished job's result
// waits to be collected: the owner's loop watches it (worker.FdWaiter).
func (j *Job[T]) Fd() int { return j.fd }

// Running reports whether a job was started and its result not collected
// yet (it may have finished).
func (j *Job[T]) Running() bool { return j.running }

// Start runs f on a goroutine of its own. f must not touch what the
// owner uses meanwhile.
func (j *Job[T]) Start(f func() (T, error)) error {
	switch {
	case j.fd < 0:
		return ErrClosed
	case j.running:
		return ErrBusy
	}
	j.running = true
	go func() {
		var r Result[T]
		defer func() {
			if p := recover(); p != nil {
				r = Result[T]{Err: fmt.Errorf("%w: %v\n%s", ErrPanicked, p, debug.Stack())}
			}
			// Signal first: a signalled eventfd then means the result
			// is sent or about to be, so Done can wait for it, and a
			// collected result has left the eventfd quiet (the other
			// order could leave it readable after the collection, and
			// the owner's loop spinning).
			j.signal()
			j.done <- r
		}()
		r.Value, r.Err = f()
	}()
	// A new goroutine waits in its creator's run slot until the creator
	// blocks or an idle P steals it; with the Ps busy (a worker loop
	// waiting in zmq_poll holds one, as any cgo call does) the update
	// started only once the loop had taken its next batch in, 550 us late
	// on 2 cores, and nothing overlapped. Yielding runs it now, and puts
	// the loop in the queue for the next P that is free.
	runtime.Gosched()
	return nil
}

// signal makes the eventfd readable. It cannot fail but for a counter at
// its maximum, which one job a time never reaches.
func (j *Job[T]) signal() {
	var one = [8]byte{1}
	_, _ = unix.Write(j.fd, one[:])
}

// Done collects the result of a finished job: ok is false while it runs
// or when none was started. It does not wait for a job to finish.
func (j *Job[T]) Done() (r Result[T], ok bool) {
	if !j.running || !j.drain() {
		return r, false
	}
	// The eventfd was signalled: the result is being sent, if it has
	// not been already.
	r = <-j.done
	j.running = false
	return r, true
}

// Wait collects the result of the job, waiting for it to finish; ok is
// false when none was started. A job cannot be interrupted (it is a slice
// of work that ends by itself, such as one update), so Wait takes no
// context.
func (j *Job[T]) Wait() (r Result[T], ok bool) {
	if !j.running {
		return r, false
	}
	r = <-j.done
	j.drain() // signalled before the send: the eventfd is quiet again
	j.running = false
	return r, true
}

// drain resets the eventfd's counter and reports whether it was
// signalled.
func (j *Job[T]) drain() bool {
	var buf [8]byte
	n, _ := unix.Read(j.fd, buf[:])
	return n == len(buf)
}

// Close waits for a running job (its result is dropped) and closes the
// eventfd.
func (j *Job[T]) Close() error {
	if j.fd < 0 {
		return nil
	}
	j.Wait()
	err := unix.Close(j.fd)
	j.fd = -1
	if err != nil {
		return fmt.Errorf("offload: close: %w", err)
	}
	return nil
}
