package nameresolve

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
)

// memMirror is a Memory's Mirror. The store is in this process, so the
// mirror reads it directly: it is always in sync.
type memMirror struct {
	m      *Memory
	prefix string
	closed atomic.Bool
}

// Mirror implements Repository.
func (m *Memory) Mirror(ctx context.Context, prefix string) (Mirror, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("mirror %q: %w", prefix, err)
	}
	m.store.mu.Unlock()
	return &memMirror{m: m, prefix: prefix}, nil
}

// Sync implements Mirror.
func (mm *memMirror) Sync(ctx context.Context) error {
	if mm.closed.Load() {
		return fmt.Errorf("mirror %q: %w", mm.prefix, ErrClosed)
	}
	if err := mm.m.lock(ctx); err != nil {
		return fmt.Errorf("mirror %q: %w", mm.prefix, err)
	}
	mm.m.store.mu.Unlock()
	return nil
}

// Get implements Mirror.
func (mm *memMirror) Get(key string) (string, bool) {
	if !strings.HasPrefix(key, mm.prefix) {
		return "", false
	}
	s := mm.m.store
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[key]
	return r.value, ok
}

// Entries implements Mirror.
func (mm *memMirror) Entries() []Entry {
	return mm.m.store.find(mm.prefix)
}

// Version implements Mirror.
func (mm *memMirror) Version() uint64 {
	s := mm.m.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Close implements Mirror.
func (mm *memMirror) Close() error {
	mm.closed.Store(true)
	return nil
}
