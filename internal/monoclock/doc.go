// Package monoclock reads the current time from the monotonic clock alone.
//
// time.Now reads both the wall clock and the monotonic clock: two reads of
// the vDSO, 60-150 ns on the development VMs, and a worker loop that turns
// a hundred thousand times a second read them some thirty times a turn
// (9% of a colocated actor's CPU). Now reads one. Its times compare and
// subtract exactly like time.Now's (by their monotonic readings), so they
// serve deadlines, intervals and rates; their wall clock is the process's
// start plus the monotonic time since, which does not follow a wall clock
// that is set, so timestamps shown to people, written to files or sent to
// other processes take time.Now.
package monoclock
