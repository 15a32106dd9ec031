// Package etcd is the nameresolve.Repository backed by an etcd cluster,
// usually the one nameresolve/etcdserver embeds in the head process.
//
// Records added with a TTL live on a lease owned by the Repository, one per
// distinct TTL, which it keeps alive. If a keep-alive stops (the lease
// expired while etcd was unreachable, or etcd restarted) the Repository
// grants a new lease and writes its records again, so a worker's address
// comes back after an etcd restart without the worker doing anything.
//
// A Repository owns the records it added with a TTL or DeleteOnExit for as
// long as nobody else writes them: a record someone else has rewritten since
// is neither re-added after a lease loss nor deleted on Close.
//
// Config.Security speaks TLS (a CA bundle, a client certificate) and etcd's
// role-based authentication to an etcd shared with others; its fields are
// etcdctl's flags. Open fails at once on a file it cannot use
// (*SecurityError), and with ErrTLS or ErrAuth, not
// nameresolve.ErrUnavailable, when etcd answers but the handshake or the
// credentials fail. Every key distrl touches is under names.DefaultRoot, so
// a role with read/write on that prefix is all it needs.
//
// Close is a graceful exit: DeleteOnExit records are deleted and leases are
// revoked, so leased records vanish at once. A process that dies without
// Close leaves its leased records to expire within their TTL.
package etcd
