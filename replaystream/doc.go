// Package replaystream is the replay's wire: the messages between actors
// and trainers (Client, a DEALER per shard) and the shards of a replay
// worker (Server, a ROUTER each), found through name resolve as the other
// streams are (package internal/endpoint). A request inserts items, caches
// an actor's items (phase one of two-phase sampling), samples a batch or
// updates priorities; item ids carry their shard, so that a priority
// update goes back to the server that holds the item. Failed requests are
// answered with an rpc.Error (bad_request, unknown_table, rate_limited,
// bad_priority). docs/replay.md has the messages; package replay the
// tables behind a server, package replayworker the worker that serves
// them.
package replaystream

import "errors"

// DefaultName is the replay stream's name when none is given.
const DefaultName = "default"

// ErrClosed is returned by a closed Client or Server.
var ErrClosed = errors.New("replaystream: closed")
