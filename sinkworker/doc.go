// Package sinkworker is the "sink" worker type: a sample consumer that validates
// and counts what actors send (batches, steps, episodes, returns, per-actor
// batch counts) and throws it away. It stands in for a trainer, so the
// actor side of a deployment can be run and measured before any learning
// code exists.
//
// Configure kwargs (all optional):
//
//	stream  sample stream to consume ("default")
//	index   consumer index within the stream (the worker's index)
//	host    interface to bind and advertise (the worker's host)
//	seed    accepted and unused (every worker of an experiment gets one)
//
// Besides the standard commands it answers "summary" with the same figures
// as its stats.
package sinkworker
