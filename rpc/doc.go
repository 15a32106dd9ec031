// Package rpc is the command channel between distrl controllers and workers.
//
// Every worker process embeds a Server: a ZMQ REP socket that dispatches
// requests to a Mux, its table of command handlers. Controllers talk to it with a Client, or to many workers
// at once with Do. The wire protocol is deliberately plain so that any
// language with zmq and msgpack can speak it (docs/protocol.md):
//
//	request: one frame, msgpack [command string, kwargs map]
//	reply:   msgpack {"ok": value} or {"error": {"type": string, "message": string}}
//
// A Python client needs only a REQ socket:
//
//	sock.send(msgpack.packb(["ping", {}]))
//	msgpack.unpackb(sock.recv())  # {"ok": "pong"}
//
// # Server
//
// The server never dies of a bad request: each gets a typed error reply
// (bad_request, unknown_command, bad_arguments, payload_too_large,
// handler_panic, handler_error, or a type the handler picks by returning an
// *Error) and the next request is served normally.
//
// Handlers run on the goroutine that calls HandleRequests or Serve, never
// concurrently with each other. A worker calls HandleRequests between slices
// of its own work, and WaitRequest when idle, so handlers can touch worker
// state without locks.
//
// # Client
//
// A Client owns one DEALER socket and tags every request with an 8-byte id
// that the REP socket echoes back, so late replies to abandoned requests are
// recognized and dropped. When a request's context ends, the socket is
// replaced, so the abandoned request can never be delivered later. Waiting is
// a zmq poll bounded by the context's deadline; Do waits on many clients with
// one poll in the calling goroutine.
//
// # Security
//
// With ServerOptions.Curve set, the server speaks CURVE and only clients that
// know its public key (ClientOptions.Curve) get answers; others time out.
package rpc
