// Package offload runs one slice of a worker's work off its loop goroutine
// and wakes the loop when it is done.
//
// A worker's loop sleeps in poll(2) on its sockets and descriptors
// (worker.FdWaiter), so work finished on another goroutine must make a
// descriptor readable to be noticed at once: a Job signals an eventfd,
// which the worker type lists in WaitFds. A trainer updates its learner on
// a Job while its loop keeps taking samples in, answering parameter fetches
// and requests.
//
// A Job runs one function at a time, and its owner (the loop) collects
// each result before starting the next. A panic in the function becomes
// its error (ErrPanicked), as one in a worker's Poll moves only that
// worker to ERROR.
package offload
