// Package workertest holds helpers for tests that run workers in-process:
// an in-memory name resolve, a logger writing to the test's log, a control
// panel, a context bounded by a test timeout, and a worker's Run loop on a
// goroutine of its own, all released when the test ends.
//
// Cleanups run last-in first-out, so a test takes its Repo before it starts
// workers or opens panels on it: the workers stop, and stop logging, before
// the name resolve closes.
package workertest
