package worker

import (
	"fmt"
	"sort"
	"sync"
)

// Registry maps worker type names to their factories: the types New can
// create. The process that runs workers builds one and passes it in
// Options.Registry (cmd/rlctl registers the built-in types; a test
// registers the types it runs); there is no global registry to fill from
// init. Create one with NewRegistry; it is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]Factory
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{types: map[string]Factory{}} }

// Register makes a worker type startable by name. A duplicate name is a
// programming error reported as an error, not a panic.
func (r *Registry) Register(name string, f Factory) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.types[name]; dup {
		return fmt.Errorf("worker: type %q registered twice", name)
	}
	r.types[name] = f
	return nil
}

// Types lists the registered worker types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.names()
}

func (r *Registry) lookup(name string) (Factory, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.types[name]
	if !ok {
		return nil, fmt.Errorf("worker: unknown type %q (known: %v)", name, r.names())
	}
	return f, nil
}

// names expects r.mu held.
func (r *Registry) names() []string {
	out := make([]string, 0, len(r.types))
	for t := range r.types {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
