package nameresolve

import (
	"context"
	"errors"
	"time"
)

var (
	// ErrNotFound: no record under the key.
	ErrNotFound = errors.New("nameresolve: name not found")
	// ErrKeyExists: Add without Replace found a live record under the key.
	ErrKeyExists = errors.New("nameresolve: name already exists")
	// ErrClosed: the repository was closed.
	ErrClosed = errors.New("nameresolve: repository closed")
	// ErrUnavailable: the backend (etcd) cannot be reached.
	ErrUnavailable = errors.New("nameresolve: name server unavailable")
)

// AddOptions says how a record lives.
type AddOptions struct {
	// TTL > 0 puts the record on a lease that this repository keeps alive;
	// once the process dies the record disappears within TTL. Zero: no expiry.
	TTL time.Duration
	// Replace overwrites an existing record instead of failing with ErrKeyExists.
	Replace bool
	// DeleteOnExit removes the record when the repository is closed.
	DeleteOnExit bool
}

// Entry is one record.
type Entry struct {
	Key   string
	Value string
}

// EventType says what happened to a watched record.
type EventType int

const (
	EventPut EventType = iota + 1
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is one change below a watched prefix.
type Event struct {
	Type  EventType
	Key   string
	Value string // empty for EventDelete
}

// Repository stores name records. Implementations are safe for concurrent use.
type Repository interface {
	// Add creates key -> value. Without opts.Replace an existing record gives ErrKeyExists.
	Add(ctx context.Context, key, value string, opts AddOptions) error
	// Get returns the value under key, or ErrNotFound.
	Get(ctx context.Context, key string) (string, error)
	// Wait blocks until key exists (watching, not polling) and returns its value.
	Wait(ctx context.Context, key string) (string, error)
	// Find returns every record whose key starts with prefix, sorted by key.
	Find(ctx context.Context, prefix string) ([]Entry, error)
	// Delete removes key; ErrNotFound if there was none.
	Delete(ctx context.Context, key string) error
	// ClearSubtree removes every record whose key starts with prefix.
	ClearSubtree(ctx context.Context, prefix string) error
	// Watch streams changes below prefix until ctx ends or the repository
	// closes, then closes the channel.
	Watch(ctx context.Context, prefix string) (<-chan Event, error)
	// Mirror returns a local copy of the records below prefix, kept current
	// until the Mirror or the repository is closed. ctx bounds the opening
	// (its first listing), not the mirror's life.
	Mirror(ctx context.Context, prefix string) (Mirror, error)
	// Close removes DeleteOnExit records, releases leases and stops watches.
	Close() error
}
