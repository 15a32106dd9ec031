// Package worker is the worker base every distrl worker process runs on, and
// the ControlPanel that drives workers from outside.
//
// A Worker binds an rpc.Server, registers "name -> host:port" in name
// resolve on a lease it keeps alive, and runs one loop: answer the requests
// already queued, then, while RUNNING, call its Impl's Poll for a bounded
// slice of work. Requests are only ever handled between slices, so handlers
// never race with the worker's own work. An idle worker sleeps in poll(2)
// on its request socket and, while RUNNING, its type's own sockets
// (SocketOwner, whose set may change as it runs: SocketSetter) and
// descriptors (FdWaiter, a shared-memory doorbell) rather than spinning, or
// until its type's own deadline (Deadliner). Where input also arrives in
// shared memory (MemoryWaiter), the loop first looks for it there for a
// bounded time (Options.SpinWait), yielding the CPU, while its recent waits
// were that short: a wake-up costs both sides more than a short look.
//
// Lifecycle:
//
//	READY -> CONFIGURED -> RUNNING <-> PAUSED -> COMPLETED | ERROR | INTERRUPTED
//
// LOST is never a worker's own state: it is what a ControlPanel concludes
// when the worker's address lease is gone.
//
// A worker type implements Impl (impl.go) in a package of its own
// (echoworker, sinkworker, policyworker, actorworker, trainerworker); its
// Factory goes into a Registry that the process passes to New, so that
// `rlctl worker --type T` can start any of them.
package worker
