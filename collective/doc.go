// Package collective is the data plane of a data-parallel group: N
// processes (a policy's trainers) that find each other through name
// resolve, agree on who they are, and then sum vectors across the group
// (an all-reduce), hand one member's bytes to all (a broadcast) and check
// that they hold the same thing.
//
// # Formation
//
// Member rank r of group g binds a PULL socket (tcp, and ipc on its node,
// as every stream socket; CurveZMQ with the trial's key pair when the
// trial has one) and a shared-memory listener (internal/shm, unless
// DISTRL_SHM=0), and registers {addr, inc, hash} under
// trial.Group(g, r) on a lease: inc is a random incarnation number drawn
// at every join, hash what members must agree on (the trainer's network
// and configuration). Every member watches the group's prefix. Once all N
// ranks are there, and its hash is rank 0's, a member links to its right
// neighbour (rank r+1 mod N): it dials the neighbour's shared-memory
// listener when the neighbour is on its node, else connects a PUSH socket
// to its PULL; it reads both from its left. The view's generation is
// a hash of all N (rank, inc) pairs. Rank 0 then sends a token round the
// ring twice: the first pass returns to it only through members whose view
// is the same generation and whose PUSH is connected; the second ("go")
// forms each member as it passes. ZeroMQ keeps a connection's order, so a
// member always receives "go" before its left neighbour's first data.
// Formation is driven by Poll and never blocks, so a worker keeps
// answering requests while its group forms.
//
// # Collectives
//
// AllreduceFloat32 and AllreduceFloat64 are a ring all-reduce, as gloo and
// Horovod run over TCP: a reduce-scatter of N-1 steps, each member sending
// one of N chunks to the right and adding the one from the left, then an
// all-gather of N-1 steps. Each member sends 2(N-1)/N of the vector in
// all, whatever N, and every chunk's sum is computed by one member and
// copied to the others, so every member ends with the same bits. Broadcast
// passes rank 0's bytes round the ring. Check compares a 64-bit hash of
// every member's state with rank 0's.
//
// A collective blocks until it is done, calling Options.Idle while it
// waits so that its caller can keep serving (a trainer answers parameter
// fetches). It fails with an error wrapping ErrBroken when a peer has been
// silent for Options.Timeout, when the view changes under it (a member's
// record expired with its process, or a restarted member registered
// again), or on a message that breaks the protocol. A broken member draws
// a new incarnation and re-registers, which changes every other member's
// view, so the whole group forms again (Poll) rather than part of it
// carrying on with a member that lost its place.
//
// # Wire
//
// Every message is a 24-byte little-endian header (kind u8, more u8: 1
// when another fragment of the payload follows, 2 bytes zero, step u32,
// generation u64, sequence u64) and a payload of at most 1 MiB: two
// ZeroMQ frames, or one shared-memory message. A member whose ring to the
// right is full takes in (copies) what arrives from the left meanwhile,
// so that bounded rings cannot deadlock members that all send before they
// receive. A token's payload is its round (one byte); a data message's is the chunk's
// values, float32 or float64 little-endian (every platform distrl builds
// for is little-endian); a broadcast's, the bytes. A message of another
// generation is dropped, so nothing of a formation outlives it.
//
// A Group belongs to one goroutine (its sockets do), like every type of
// the data plane.
package collective
