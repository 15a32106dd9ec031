// Package stream is distrl's data plane: the inference stream between actors
// and policy workers, and the sample stream from actors to trainers (or to a
// sink standing in for one). The replay's wire, found the same way, is
// package replaystream; the parameters', package paramstream.
//
// Both streams find their peers through name resolve (package
// internal/endpoint). The side that binds
// (an InferenceServer, a SampleConsumer) registers its address under
// trial.Stream(kind, name, index) on a lease; the side that connects (a
// RemoteInferenceClient, a SampleProducer) connects to every record under
// trial.StreamPrefix(kind, name) and watches the prefix for more. A process
// that dies therefore drops out of its peers' view within the lease TTL,
// and one that starts is used within moments.
//
// # Threading
//
// ZMQ sockets belong to one goroutine. Every type here is meant for the
// goroutine that created it (a worker's loop) and is not safe for
// concurrent use. Name-resolve watches run on a goroutine of their own and
// only hand over the latest set of endpoints; the owner applies connects
// and disconnects at its next Flush, Poll or Post, so the socket never
// leaves its goroutine. Nothing here blocks on the network: sends and
// receives are non-blocking, and waiting is left to the caller, who polls
// the Socket of each type together with its own.
//
// # Inference
//
// A RemoteInferenceClient holds one DEALER socket connected to every policy
// worker of its policy. Post queues an observation; Flush sends everything
// posted since the last Flush as one message, which the DEALER hands to the
// next live policy worker in turn, so an actor's load spreads over all of
// them and moves away from one that dies. Replies are matched to requests by
// id; a request unanswered after Timeout fails with ErrInferenceFailed and
// the actor posts it again, so a dead policy worker costs one timeout, not a
// stuck actor. A reply that comes after its request expired is dropped.
//
// An InferenceServer (the policy worker's side) holds a ROUTER socket. Poll
// concatenates whole requests, from any number of clients, into one batch
// of observations; Respond cuts the policy's answer back into one reply per
// request. A malformed request is counted and dropped: the server never
// dies of a message. A well-formed request whose observations have the
// wrong length (actors and policy workers configured for different
// environments) is refused: the reply carries the reason instead of an
// inference, and the client fails those requests at once with
// ErrInferenceRefused rather than let them time out and post them again.
//
// InlineInferenceClient has the same methods and runs an api.Policy in the
// actor's own process, for single-process runs and benchmarks.
//
// # Samples and back-pressure
//
// A SampleProducer holds a PUSH socket connected to every SampleConsumer of
// its stream; batches are dealt round-robin to consumers that have room.
// Post never blocks. Queues are bounded: SendHWM batches per consumer on
// the producer's side, plus RecvHWM batches in each consumer (ZMQ's
// high-water marks, which count messages). When every queue is full, or no
// consumer is known, Post returns ErrBackpressure and the batch is not
// sent; the actor keeps it, stops stepping its environments, and posts it
// again until it goes out. A slow trainer thus slows its actors down
// instead of making them buffer without bound or drop data. (The kernel's
// TCP buffers hold some batches too, a few MiB per connection on loopback,
// so back-pressure sets in after somewhat more than the high-water marks.)
//
// # Wire format
//
// Every message is one frame of msgpack; arrays are api.Tensor maps
// ({dtype, shape, data: bin}), so a Python peer needs only pyzmq, msgpack
// and numpy:
//
//	inference request  (DEALER -> ROUTER): {"ids": int64 [n], "obs": float32 [n, d]}
//	inference reply    (ROUTER -> DEALER): {"ids": int64 [n], "inference": api.Inference}
//	                                    or {"ids": int64 [n], "error": string} (refused)
//	sample             (PUSH -> PULL):     an api.SampleBatch
//
// Between processes of one node, inference requests and replies travel
// over shared memory instead (internal/shm), in the same msgpack: the
// server advertises a listener, a same-node client dials it and sends
// there, and ZeroMQ carries only what a ring cannot take. Each side's
// doorbell (WaitFds, PrepareWait) wakes it when the other sends while it
// sleeps. DISTRL_SHM=0 turns this off.
//
// Within one process (a policy worker hosted with its actor), they are
// not encoded at all: the client hands a copy of its rows to the server's
// inbox, found by the listener's directory, and the server hands back
// each row's result, under a mutex a side, with the same doorbells
// (inference_local.go). Such a client and server may run on different
// goroutines. DISTRL_INPROCESS=0 (or DISTRL_SHM=0) turns this off.
//
// Address records hold "host:port" (a value with a scheme, such as
// "tcp://host:port" or "ipc:///path", is used as is). A bound stream socket
// is also bound to an ipc:// path and advertises "host:port|ipc:///path|node"
// (an inference server adds "|shm:///dir")
// (zsock.Advertise): a peer on the same node (zsock.NodeName) connects over
// ipc, any other over tcp; DISTRL_IPC=0 turns the ipc endpoint off. Bound sockets cap the
// size of a message they accept (MaxMsgSize, 64 MiB by default): ZMQ drops
// the connection of a peer that sends more, so hostile input cannot make a
// consumer allocate without bound.
package stream
