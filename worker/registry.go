package worker

import (
	"fmt"
	"sort"
	"sync"

	"github.com/distrl/distrl/worker/member"
)

// Type describes a worker type to the process that runs its workers (New)
// and, through its member.Spec, to the controller that plans a trial of
// them, so that the controller needs no knowledge of any type.
type Type struct {
	// Name is the type's name in experiment configs and worker names.
	Name string
	// New makes a worker of the type.
	New Factory
	member.Spec
}

// Registry maps worker type names to their Types: the types New can
// create. The process that runs workers builds one and passes it in
// Options.Registry (cmd/rlctl registers the built-in types; a test
// registers the types it runs); there is no global registry to fill from
// init. Create one with NewRegistry; it is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]Type
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{types: map[string]Type{}} }

// Add makes a worker type startable by its name. A duplicate name, or a
// type without a name or a factory, is a programming error reported as an
// error, not a panic.
func (r *Registry) Add(t Type) error {
	if t.Name == "" || t.New == nil {
		return fmt.Errorf("worker: type %q: a name and a factory are required", t.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.types[t.Name]; dup {
		return fmt.Errorf("worker: type %q registered twice", t.Name)
	}
	r.types[t.Name] = t
	return nil
}

// Register adds a type that has a factory and nothing else (no early
// configuration check, no checkpoints), as tests and examples define.
func (r *Registry) Register(name string, f Factory) error {
	return r.Add(Type{Name: name, New: f})
}

// Lookup returns the type registered under name.
func (r *Registry) Lookup(name string) (Type, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[name]
	return t, ok
}

// Spec returns the member.Spec of the type registered under name: what a
// controller needs of it.
func (r *Registry) Spec(name string) (member.Spec, bool) {
	t, ok := r.Lookup(name)
	return t.Spec, ok
}

// Types lists the registered worker types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.names()
}

func (r *Registry) lookup(name string) (Factory, error) {
	t, ok := r.Lookup(name)
	if !ok {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return nil, fmt.Errorf("worker: unknown type %q (known: %v)", name, r.names())
	}
	return t.New, nil
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
