// Package zsock holds the ZMQ idioms that package stream (the data plane),
// package paramstream (parameter distribution) and package rpc share: setting a new
// socket's options, binding to a free TCP port, turning a registered
// address into an endpoint, telling the errors of a non-blocking send
// apart, reading one msgpack value per frame, and rate-limiting the
// warnings about malformed input.
//
// It knows nothing of name resolve or of either package's messages; what
// differs between the two (what a record holds, how it is written and
// removed) stays with them.
package zsock
