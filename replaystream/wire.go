package replaystream

import (
	"fmt"
	"math"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/rpc"
)

// Replay operations (Request.Op).
const (
	// OpInsert: Items with Priorities (one each) into Table; the reply
	// carries their IDs. Held while the table's rate limiter refuses
	// inserts, up to TimeoutMs.
	OpInsert = "insert"
	// OpCache: an actor's cache (phase one of two-phase sampling):
	// Items, each with the server priority Sum/len(Items), replacing
	// Actor's previous cache in Table.
	OpCache = "cache"
	// OpSample: N items of Table; held while the limiter refuses
	// samples (or the table is below its min size), up to TimeoutMs.
	OpSample = "sample"
	// OpUpdate: new Priorities for IDs of Table.
	OpUpdate = "update"
)

// Error types (rpc.Error.Type) of a failed Reply.
const (
	ErrTypeBadRequest  = "bad_request"
	ErrTypeNoTable     = "unknown_table"
	ErrTypeRateLimited = "rate_limited"
	ErrTypeBadPriority = "bad_priority"
)

// MaxItems bounds the items, ids or priorities of one message.
const MaxItems = 1 << 16

// Request is one message from a replay client to a replay server.
type Request struct {
	Op  string `msgpack:"op"`
	RID int64  `msgpack:"rid"`
	// Table names the table.
	Table      string              `msgpack:"table"`
	TimeoutMs  int64               `msgpack:"timeout_ms"`
	Items      [][]byte            `msgpack:"items"`
	Priorities api.Tensor[float64] `msgpack:"priorities"`
	IDs        api.Tensor[int64]   `msgpack:"ids"`
	N          int                 `msgpack:"n"`
	Actor      string              `msgpack:"actor"`
	Sum        float64             `msgpack:"sum"`

	identity []byte // the client's ROUTER identity (server side)
}

// validate checks a decoded request's shape; table logic checks the rest.
func (r *Request) validate() error {
	if r.Table == "" {
		return fmt.Errorf("no table")
	}
	n := r.Priorities.Len()
	switch r.Op {
	case OpInsert, OpCache:
		if len(r.Items) == 0 || len(r.Items) > MaxItems {
			return fmt.Errorf("%s of %d items: want 1..%d", r.Op, len(r.Items), MaxItems)
		}
		if r.Op == OpInsert && (n != len(r.Items) || len(r.Priorities.Shape) != 1) {
			return fmt.Errorf("insert of %d items with %d priorities", len(r.Items), n)
		}
		if r.Op == OpCache && (!(r.Sum >= 0) || math.IsInf(r.Sum, 0) || r.Actor == "") {
			return fmt.Errorf("cache with sum %v, actor %q: want a finite sum >= 0 and an actor", r.Sum, r.Actor)
		}
	case OpSample:
		if r.N <= 0 || r.N > MaxItems {
			return fmt.Errorf("sample of %d: want 1..%d", r.N, MaxItems)
		}
	case OpUpdate:
		if n != r.IDs.Len() || n == 0 || n > MaxItems {
			return fmt.Errorf("update of %d ids with %d priorities", r.IDs.Len(), n)
		}
	default:
		return fmt.Errorf("unknown op %q", r.Op)
	}
	if r.TimeoutMs < 0 {
		return fmt.Errorf("timeout_ms %d is negative", r.TimeoutMs)
	}
	return nil
}

// maxDropsPerPoll bounds how many malformed messages one receive discards
// before it returns, so a flood of garbage cannot keep the loop from its
// other work.
const maxDropsPerPoll = 256

// Reply answers one Request; a failed one carries an rpc.Error of one of
// the ErrType* types.
type Reply struct {
	Op    string     `msgpack:"op"`
	RID   int64      `msgpack:"rid"`
	Error *rpc.Error `msgpack:"error"`
	// IDs: the ids of inserted items, or of sampled ones.
	IDs api.Tensor[int64] `msgpack:"ids"`
	// Sampled items: data, priority, probability and importance weight.
	Items         [][]byte            `msgpack:"items"`
	Priorities    api.Tensor[float64] `msgpack:"priorities"`
	Probabilities api.Tensor[float64] `msgpack:"probabilities"`
	Weights       api.Tensor[float64] `msgpack:"weights"`
	// Size is the table's size after the operation.
	Size    int `msgpack:"size"`
	Updated int `msgpack:"updated"`
	Unknown int `msgpack:"unknown"`

	// Shard is the index of the server that answered (client side).
	Shard int `msgpack:"-"`
}

// decodeReplay decodes one frame into v (a request or a reply), checked
// by msgpackcheck first; unknown fields are refused.
func decode(d *zsock.Decoder, frame []byte, v any) error {
	dec, err := d.Reset(frame)
	if err != nil {
		return err
	}
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return err
	}
	return d.Finish()
}

// Item ids carry the shard (the replay worker's index) that holds them in
// bits 56..62, so a client sends a priority update to the right server.
const (
	ShardShift = 56
	MaxShard   = 127
)

// ShardOf is the shard that holds item id.
func ShardOf(id int64) int { return int(id >> ShardShift) }
