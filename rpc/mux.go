package rpc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Mux is a command table: it maps command names to handlers. It is apart
// from the transport as http.ServeMux is from http.Server: whoever owns a
// process's commands (the worker base, the controller) fills a Mux, and a
// Server dispatches the requests its socket receives to it
// (ServerOptions.Mux). A Mux is safe for concurrent use.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	served   atomic.Uint64
	observer atomic.Pointer[Observer]
}

// Observer is told the outcome of each request a Server dispatched to a
// Mux, on the goroutine that served it: the command ("" for one the Mux
// has no handler for, so that a client cannot name new series in the
// observer's metrics) and "ok" or the error type of the reply.
type Observer func(command, outcome string)

// SetObserver installs o (nil: none) as the Mux's observer.
func (m *Mux) SetObserver(o Observer) {
	if o == nil {
		m.observer.Store(nil)
		return
	}
	m.observer.Store(&o)
}

func (m *Mux) observe(command, outcome string) {
	if o := m.observer.Load(); o != nil {
		(*o)(command, outcome)
	}
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}} }

// Handle installs h as the handler of command. It fails with
// ErrDuplicateCommand if command already has one.
func (m *Mux) Handle(command string, h Handler) error {
	if command == "" {
		return errors.New("rpc: register: empty command")
	}
	if h == nil {
		return fmt.Errorf("rpc: register %q: nil handler", command)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.handlers[command]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateCommand, command)
	}
	m.handlers[command] = h
	return nil
}

// HandleAll installs every handler of table, in command order, and stops
// at the first failure.
func (m *Mux) HandleAll(table map[string]Handler) error {
	for _, cmd := range slices.Sorted(maps.Keys(table)) {
		if err := m.Handle(cmd, table[cmd]); err != nil {
			return err
		}
	}
	return nil
}

// Commands returns the registered commands, sorted.
func (m *Mux) Commands() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.handlers))
}

// Handler returns the handler of command, nil if it has none.
func (m *Mux) Handler(command string) Handler {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.handlers[command]
}

// Served counts the requests a Server has dispatched to this Mux, answered
// or not: the owner of many Muxes on one Server (a worker host) tells from
// it which of them had requests.
func (m *Mux) Served() uint64 { return m.served.Load() }
