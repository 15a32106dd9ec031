package nameresolve

import "context"

// Mirror is a local copy of the records below one prefix, kept current by
// a watch, so that a process resolving many names reads memory instead of
// listing the name server every time.
//
// Get and Entries answer from the copy at once. The copy may lag the name
// server by a watch event in flight; Sync closes that gap: once it returns
// nil, the copy holds every change the name server had made when Sync was
// called (a read after Sync is as fresh as a Get, for the cost of one round
// trip whatever the number of records). A Mirror is safe for concurrent use.
type Mirror interface {
	// Sync returns once the copy holds every change made before Sync was
	// called. While the name server cannot be reached it fails (wrapping
	// ErrUnavailable where the backend can tell) and the copy keeps the last
	// records it knew.
	Sync(ctx context.Context) error
	// Get returns the record under key (which includes the prefix).
	Get(key string) (value string, ok bool)
	// Entries returns every record of the copy, sorted by key.
	Entries() []Entry
	// Version changes whenever the copy changes (and may change when it
	// does not), so that a caller can tell whether what it derived from
	// Entries is out of date without comparing them.
	Version() uint64
	// Close stops the watch. Sync then returns ErrClosed.
	Close() error
}
