// Package api holds the data types and interfaces that every other part of
// distrl shares: numeric tensors and their wire encoding, observation and
// action spaces, the environment interface and registry, trajectory batches
// (SampleBatch) and the policy interface.
//
// It sits at the bottom of the import graph and imports nothing else from
// distrl, so environments, policies, actors and trainers can all depend on
// it without depending on each other.
//
// # Wire format
//
// A [Tensor] travels through msgpack as the map described in
// docs/protocol.md ("Numeric arrays"):
//
//	{"dtype": "float32", "shape": [T, 4], "data": <bin, little-endian, C order>}
//
// The keys may come in any order; no other key is accepted. A NumPy "bool"
// array decodes into a Tensor[uint8]. The encoder may write a key with a
// longer msgpack string header than needed so that the data lands 8-byte
// aligned in the output buffer (see [Tensor.EncodeMsgpack]); any msgpack
// reader accepts that. A zero Tensor (no shape, no data) travels as msgpack
// nil, so optional arrays in a [SampleBatch] cost one byte when absent.
//
// Decoding validates everything it reads (dtype, rank, dimensions, byte
// count) before allocating, and grows buffers only as bytes arrive, so
// hostile input yields an error rather than a panic or a huge allocation.
package api
