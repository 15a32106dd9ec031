// Package duty measures the share of wall time a condition held over a
// sliding window: an actor says how much of the last minute it spent
// back-pressured by its trainer, a trainer how much its learner updated.
// A Window keeps a fixed ring of buckets of intervals recorded in order,
// so recording is constant time and allocation free, and what left the
// window is forgotten a bucket at a time. A Meter samples a running total
// of busy time instead, for work accounted when it ends. A Latch turns a
// share into a bound with hysteresis, for notes that should not flap.
package duty
