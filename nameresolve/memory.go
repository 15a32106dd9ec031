package nameresolve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// errEmptyKey and errEmptyPrefix guard against the two argument mistakes
// that etcd would either reject with an opaque error or, for ClearSubtree,
// silently turn into "delete everything".
var (
	errEmptyKey    = errors.New("nameresolve: empty key")
	errEmptyPrefix = errors.New("nameresolve: refusing to clear the empty prefix (every record)")
)

// memStore is the state shared by every Memory made by one NewMemory call and
// its Peers: it plays the part of the etcd cluster.
type memStore struct {
	mu       sync.Mutex
	records  map[string]memRecord
	changed  chan struct{} // closed and replaced on every change; wakes Wait
	watchers map[*memWatcher]struct{}
	version  uint64 // counts changes; a memMirror's Version
}

// memRecord is one record and the handle that owns it, which decides whether
// the record goes away when that handle closes.
type memRecord struct {
	value string
	owner *Memory
	opts  AddOptions
}

// Memory is an in-process Repository for unit tests.
//
// TTL is accepted and recorded but nothing ever expires: a process cannot die
// underneath an in-memory store. Close behaves like a graceful exit of the
// etcd backend: records this handle added with DeleteOnExit or a TTL (whose
// lease the etcd backend revokes) are removed, watch channels are closed, and
// later calls return ErrClosed.
//
// Peer gives further handles on the same records, standing in for other
// processes talking to the same etcd.
type Memory struct {
	store *memStore
	done  chan struct{}  // closed by Close; stops this handle's watches
	wg    sync.WaitGroup // watch goroutines, so Close returns after their channels close

	closed bool // guarded by store.mu
}

var _ Repository = (*Memory)(nil)

// NewMemory returns an empty in-process repository.
func NewMemory() *Memory {
	s := &memStore{
		records:  make(map[string]memRecord),
		changed:  make(chan struct{}),
		watchers: make(map[*memWatcher]struct{}),
	}
	return &Memory{store: s, done: make(chan struct{})}
}

// Peer returns a new handle on the same records, as a second process talking
// to the same name server would have. Closing one handle does not close the other.
func (m *Memory) Peer() *Memory {
	return &Memory{store: m.store, done: make(chan struct{})}
}

// lock takes the store lock and reports ErrClosed if this handle is closed;
// on error the lock is not held.
func (m *Memory) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.store.mu.Lock()
	if m.closed {
		m.store.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Add implements Repository.
func (m *Memory) Add(ctx context.Context, key, value string, opts AddOptions) error {
	if key == "" {
		return errEmptyKey
	}
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("add %q: %w", key, err)
	}
	defer m.store.mu.Unlock()
	if _, ok := m.store.records[key]; ok && !opts.Replace {
		return fmt.Errorf("add %q: %w", key, ErrKeyExists)
	}
	m.store.records[key] = memRecord{value: value, owner: m, opts: opts}
	m.store.publish(Event{Type: EventPut, Key: key, Value: value})
	return nil
}

// Get implements Repository.
func (m *Memory) Get(ctx context.Context, key string) (string, error) {
	if err := m.lock(ctx); err != nil {
		return "", fmt.Errorf("get %q: %w", key, err)
	}
	defer m.store.mu.Unlock()
	r, ok := m.store.records[key]
	if !ok {
		return "", fmt.Errorf("get %q: %w", key, ErrNotFound)
	}
	return r.value, nil
}

// Wait implements Repository. It sleeps on the store's change channel, which
// every write closes, so it never polls.
func (m *Memory) Wait(ctx context.Context, key string) (string, error) {
	for {
		if err := m.lock(ctx); err != nil {
			return "", fmt.Errorf("wait for %q: %w", key, err)
		}
		r, ok := m.store.records[key]
		changed := m.store.changed
		m.store.mu.Unlock()
		if ok {
			return r.value, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("wait for %q: %w", key, ctx.Err())
		case <-m.done:
			return "", fmt.Errorf("wait for %q: %w", key, ErrClosed)
		}
	}
}

// Find implements Repository.
func (m *Memory) Find(ctx context.Context, prefix string) ([]Entry, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("find %q: %w", prefix, err)
	}
	m.store.mu.Unlock()
	return m.store.find(prefix), nil
}

// find lists the records below prefix, sorted by key.
func (s *memStore) find(prefix string) []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for k, r := range s.records {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Entry{Key: k, Value: r.value})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Delete implements Repository.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	defer m.store.mu.Unlock()
	if _, ok := m.store.records[key]; !ok {
		return fmt.Errorf("delete %q: %w", key, ErrNotFound)
	}
	m.store.remove(key)
	return nil
}

// ClearSubtree implements Repository. The empty prefix is refused.
func (m *Memory) ClearSubtree(ctx context.Context, prefix string) error {
	if prefix == "" {
		return errEmptyPrefix
	}
	if err := m.lock(ctx); err != nil {
		return fmt.Errorf("clear %q: %w", prefix, err)
	}
	defer m.store.mu.Unlock()
	// Delete in key order so watchers see the same order etcd would give.
	var keys []string
	for k := range m.store.records {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		m.store.remove(k)
	}
	return nil
}

// Close implements Repository. It is idempotent.
func (m *Memory) Close() error {
	s := m.store
	s.mu.Lock()
	if m.closed {
		s.mu.Unlock()
		return nil
	}
	m.closed = true
	var keys []string
	for k, r := range s.records {
		if r.owner == m && (r.opts.DeleteOnExit || r.opts.TTL > 0) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.remove(k)
	}
	s.mu.Unlock()

	close(m.done)
	m.wg.Wait()
	return nil
}

// remove deletes key and tells watchers. The caller holds s.mu.
func (s *memStore) remove(key string) {
	delete(s.records, key)
	s.publish(Event{Type: EventDelete, Key: key})
}

// publish queues ev for every matching watcher and wakes every Wait.
// The caller holds s.mu.
func (s *memStore) publish(ev Event) {
	for w := range s.watchers {
		if strings.HasPrefix(ev.Key, w.prefix) {
			w.queue = append(w.queue, ev)
			select {
			case w.signal <- struct{}{}:
			default: // already signalled; the forwarder will drain the whole queue
			}
		}
	}
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
}
