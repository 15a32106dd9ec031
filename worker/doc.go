// Package worker is the worker base every distrl worker process runs on:
// the server side of a trial's members. Its contract with the rest (states,
// records, command names, stats keys) is package worker/member; the client
// that drives workers from outside is package worker/panel.
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
// LOST and HUNG are never a worker's own states: a panel concludes them
// when the worker's address lease is gone or its loop's heartbeat stale.
//
// A worker type implements Impl (impl.go) in a package of its own
// (echoworker, sinkworker, policyworker, actorworker, trainerworker,
// replayworker) and describes itself as a Type (its factory, and the
// member.Spec a controller plans with); the Types go into a Registry that
// the process passes to New, so that `rlctl worker --type T` can start any
// of them. DecodeConfig and Threads serve the types' configurations.
package worker
