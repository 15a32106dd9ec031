package replay

import (
	"errors"
	"fmt"
)

// Errors for errors.Is.
var (
	// ErrBadOptions: a table's options are out of range.
	ErrBadOptions = errors.New("replay: bad table options")
	// ErrBadPriority: a priority is NaN, infinite or negative. The call
	// that carried it changed nothing.
	ErrBadPriority = errors.New("replay: bad priority")
	// ErrBadArgument: a call's arguments do not fit together (ids and
	// priorities of different lengths, a batch the limiter can never
	// allow).
	ErrBadArgument = errors.New("replay: bad argument")
	// ErrWouldBlock: a Try call found the rate limiter closed.
	ErrWouldBlock = errors.New("replay: rate limiter would block")
	// ErrBadState: a checkpointed table state is inconsistent.
	ErrBadState = errors.New("replay: bad table state")
)

// Side is one side of the rate limiter: the inserters or the samplers.
type Side string

// The two sides.
const (
	SideInsert Side = "insert"
	SideSample Side = "sample"
)

// RateLimitError is the error of a call the rate limiter held back: a
// Try call (Err is ErrWouldBlock) or a blocking call whose context ended
// first (Err is the context's error). Blocked is the side that waited;
// the side it was starved of is the other one (Starved).
type RateLimitError struct {
	Table   string
	Blocked Side
	// Reason says what the limiter waits for.
	Reason string
	Size   int
	// Inserts and Samples are the table's counts when the call gave up.
	Inserts, Samples int64
	Err              error
}

// Starved names what the blocked side was waiting for.
func (e *RateLimitError) Starved() string {
	if e.Blocked == SideSample {
		return "inserts"
	}
	return "samples"
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("replay: table %q: %s blocked, starved of %s: %s (size %d, inserts %d, samples %d): %v",
		e.Table, e.Blocked, e.Starved(), e.Reason, e.Size, e.Inserts, e.Samples, e.Err)
}

func (e *RateLimitError) Unwrap() error { return e.Err }
