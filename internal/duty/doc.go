// Package duty measures the share of wall time a condition held over a
// sliding window: an actor says how much of the last minute it spent
// back-pressured by its trainer. A Window keeps a fixed ring of buckets,
// so recording is constant time and allocation free, and what left the
// window is forgotten a bucket at a time.
package duty
