package nameresolve

import (
	"context"
	"fmt"
)

// memWatcher is one Watch on a Memory. Writers append to queue under the
// store lock and never block on a slow reader; a forwarding goroutine drains
// the queue into the caller's channel in order.
type memWatcher struct {
	prefix string
	queue  []Event       // guarded by memStore.mu
	signal chan struct{} // capacity 1: "queue is not empty"
}

// Watch implements Repository. Events are delivered in the order the writes
// happened; the channel closes when ctx ends or the handle is closed.
func (m *Memory) Watch(ctx context.Context, prefix string) (<-chan Event, error) {
	if err := m.lock(ctx); err != nil {
		return nil, fmt.Errorf("watch %q: %w", prefix, err)
	}
	w := &memWatcher{prefix: prefix, signal: make(chan struct{}, 1)}
	m.store.watchers[w] = struct{}{}
	// Add under the lock so Close, which sets closed under the same lock
	// before waiting, cannot miss this goroutine.
	m.wg.Add(1)
	m.store.mu.Unlock()

	out := make(chan Event)
	go m.forward(ctx, w, out)
	return out, nil
}

// forward moves w's queued events to out until ctx ends or m closes.
func (m *Memory) forward(ctx context.Context, w *memWatcher, out chan<- Event) {
	defer m.wg.Done()
	defer close(out)
	defer func() {
		m.store.mu.Lock()
		delete(m.store.watchers, w)
		m.store.mu.Unlock()
	}()
	for {
		m.store.mu.Lock()
		batch := w.queue
		w.queue = nil
		m.store.mu.Unlock()
		for _, ev := range batch {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			case <-m.done:
				return
			}
		}
		select {
		case <-w.signal:
		case <-ctx.Done():
			return
		case <-m.done:
			return
		}
	}
}
