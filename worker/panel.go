package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrWorkerNotFound: no live address record for the worker.
var ErrWorkerNotFound = errors.New("worker not found")

// PanelOptions configure a ControlPanel.
type PanelOptions struct {
	// Curve holds the keys for workers that run with CURVE; nil for plaintext.
	Curve *rpc.CurveClientKeys
	// HungAfter is how old a live worker's loop heartbeat may be before
	// the panel reports it HUNG: DefaultHungAfter if zero, negative: never.
	// Hosts' clocks must agree to well within it.
	HungAfter time.Duration
}

// DefaultHungAfter is PanelOptions.HungAfter's default: 30 heartbeats.
const DefaultHungAfter = 30 * time.Second

// ControlPanel drives the workers of one trial: it resolves their names,
// keeps one connection per worker and makes plain, async and group
// requests. It is safe for concurrent use.
type ControlPanel struct {
	repo  nameresolve.Repository
	trial names.Trial
	opts  PanelOptions

	mu        sync.Mutex
	clients   map[string]*rpc.Client
	closed    bool
	stopWatch context.CancelFunc
}

// NewControlPanel returns a panel for the workers of trial. It watches the
// trial's address records, so a connection to a worker that went away or
// came back at another address is dropped at once rather than timing out.
func NewControlPanel(repo nameresolve.Repository, trial names.Trial, opts PanelOptions) *ControlPanel {
	ctx, cancel := context.WithCancel(context.Background())
	if opts.HungAfter == 0 {
		opts.HungAfter = DefaultHungAfter
	}
	p := &ControlPanel{repo: repo, trial: trial, opts: opts, clients: map[string]*rpc.Client{}, stopWatch: cancel}
	// Without the watch the panel still works: a failed request drops its
	// connection and the next one resolves the name again.
	if events, err := repo.Watch(ctx, trial.WorkerPrefix()); err == nil {
		go p.follow(events)
	}
	return p
}

// follow drops kept connections whose worker's address record changed.
func (p *ControlPanel) follow(events <-chan nameresolve.Event) {
	for ev := range events {
		name := strings.TrimPrefix(ev.Key, p.trial.WorkerPrefix())
		p.mu.Lock()
		c, ok := p.clients[name]
		stale := ok && (ev.Type == nameresolve.EventDelete || c.Address() != ev.Value)
		if stale {
			delete(p.clients, name)
		}
		p.mu.Unlock()
		if stale {
			_ = c.Close() // waits for a request in flight on it, bounded by that request's ctx
		}
	}
}

// Trial is the key space the panel works in.
func (p *ControlPanel) Trial() names.Trial { return p.trial }

// Connect waits until every named worker has registered (bounded by ctx) and
// connects to it. A worker that re-registered at a new address is reconnected.
func (p *ControlPanel) Connect(ctx context.Context, workers ...string) error {
	for _, name := range workers {
		addr, err := p.repo.Wait(ctx, p.trial.Worker(name))
		if err != nil {
			return fmt.Errorf("control panel: waiting for %s: %w", name, err)
		}
		if _, err := p.connect(name, addr); err != nil {
			return err
		}
	}
	return nil
}

// AutoConnect connects to every worker registered in the trial and returns their names, sorted.
func (p *ControlPanel) AutoConnect(ctx context.Context) ([]string, error) {
	addrs, err := p.findNamed(ctx, p.trial.WorkerPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(addrs))
	for name, addr := range addrs {
		if _, err := p.connect(name, addr); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// connect returns the kept client of name, replacing it if addr changed.
func (p *ControlPanel) connect(name, addr string) (*rpc.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("control panel: %w", rpc.ErrClosed)
	}
	if c, ok := p.clients[name]; ok {
		if c.Address() == addr {
			return c, nil
		}
		_ = c.Close()
		delete(p.clients, name)
	}
	c, err := rpc.Dial(addr, rpc.ClientOptions{Curve: p.opts.Curve})
	if err != nil {
		return nil, fmt.Errorf("control panel: connect %s at %s: %w", name, addr, err)
	}
	p.clients[name] = c
	return c, nil
}

// client returns the connection to name at the address its record holds
// now. The name is resolved on every request, not only on first use: the
// watch that drops stale connections lags behind the records, and a worker
// restarted at a new address would otherwise get the request at its old
// one (seen under load: a configure sent to a stopped trainer's address
// after its successor registered). While the name server cannot be
// reached, the kept connection is used.
func (p *ControlPanel) client(ctx context.Context, name string) (*rpc.Client, error) {
	p.mu.Lock()
	c, ok := p.clients[name]
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("control panel: %w", rpc.ErrClosed)
	}
	addr, err := p.repo.Get(ctx, p.trial.Worker(name))
	return p.resolved(name, addr, err, c, ok)
}

// resolved is client's choice once the address lookup returned addr, err.
func (p *ControlPanel) resolved(name, addr string, err error, kept *rpc.Client, ok bool) (*rpc.Client, error) {
	switch {
	case errors.Is(err, nameresolve.ErrNotFound):
		return nil, fmt.Errorf("control panel: %s in %s: %w", name, p.trial.Prefix(), ErrWorkerNotFound)
	case err != nil && ok:
		return kept, nil
	case err != nil:
		return nil, fmt.Errorf("control panel: resolve %s: %w", name, err)
	}
	return p.connect(name, addr)
}

// forget drops the kept connection to name after a failure that may mean
// the worker moved, so the next request resolves it afresh.
func (p *ControlPanel) forget(name string, c *rpc.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clients[name] == c {
		_ = c.Close()
		delete(p.clients, name)
	}
}

// Request sends command to worker and decodes the reply into reply (nil discards it).
func (p *ControlPanel) Request(ctx context.Context, worker, command string, kwargs, reply any) error {
	c, err := p.client(ctx, worker)
	if err != nil {
		return err
	}
	err = c.Request(ctx, command, kwargs, reply)
	if err != nil && isTransportFailure(err) {
		p.forget(worker, c)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", worker, command, err)
	}
	return nil
}

// isTransportFailure: no reply came (as opposed to a remote error reply).
func isTransportFailure(err error) bool {
	var re *rpc.Error
	return !errors.As(err, &re)
}

// Future is the pending result of an AsyncRequest.
type Future struct {
	done  chan struct{}
	reply msgpack.RawMessage
	err   error
}

// Done is closed once the result is in.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait blocks until the result is in (or ctx ends) and decodes it into reply.
// A result already in wins over an ended ctx.
func (f *Future) Wait(ctx context.Context, reply any) error {
	select {
	case <-f.done:
	default:
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.err != nil || reply == nil {
		return f.err
	}
	return msgpack.Unmarshal(f.reply, reply)
}

// AsyncRequest sends command to worker and returns at once; the Future
// completes when the reply arrives or ctx ends.
func (p *ControlPanel) AsyncRequest(ctx context.Context, worker, command string, kwargs any) *Future {
	f := &Future{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.err = p.Request(ctx, worker, command, kwargs, &f.reply)
	}()
	return f
}

// Result is one worker's answer to a group request.
type Result struct {
	Worker string
	Reply  msgpack.RawMessage
	Err    error
}

// Decode decodes the reply into v, or returns the request's error.
func (r Result) Decode(v any) error {
	if r.Err != nil {
		return r.Err
	}
	return msgpack.Unmarshal(r.Reply, v)
}

// GroupRequest sends the same command and kwargs to every worker at once,
// over the kept connections, under ctx's one deadline.
func (p *ControlPanel) GroupRequest(ctx context.Context, workers []string, command string, kwargs any) []Result {
	each := make([]any, len(workers))
	for i := range each {
		each[i] = kwargs
	}
	return p.GroupRequestEach(ctx, workers, command, each)
}

// GroupRequestEach sends command to workers[i] with kwargs[i], all at once.
// Results come in the order of workers.
func (p *ControlPanel) GroupRequestEach(ctx context.Context, workers []string, command string, kwargs []any) []Result {
	results := make([]Result, len(workers))
	if len(kwargs) != len(workers) {
		for i, w := range workers {
			results[i] = Result{Worker: w, Err: fmt.Errorf("group request: %d workers but %d kwargs", len(workers), len(kwargs))}
		}
		return results
	}
	calls := make([]*rpc.Call, 0, len(workers))
	index := make([]int, 0, len(workers))
	// One listing resolves every worker (as client does for one).
	addrs, findErr := p.findNamed(ctx, p.trial.WorkerPrefix())
	for i, w := range workers {
		results[i].Worker = w
		p.mu.Lock()
		kept, ok := p.clients[w]
		p.mu.Unlock()
		addr, err := addrs[w], findErr
		if err == nil && addr == "" {
			err = nameresolve.ErrNotFound
		}
		c, err := p.resolved(w, addr, err, kept, ok)
		if err != nil {
			results[i].Err = err
			continue
		}
		calls = append(calls, &rpc.Call{Client: c, Command: command, Kwargs: kwargs[i], Reply: &results[i].Reply})
		index = append(index, i)
	}
	rpc.Do(ctx, calls)
	for j, call := range calls {
		r := &results[index[j]]
		if call.Err != nil {
			if isTransportFailure(call.Err) {
				p.forget(r.Worker, call.Client)
			}
			r.Err = fmt.Errorf("%s %s: %w", r.Worker, command, call.Err)
		}
	}
	return results
}

// WorkerStatus reads a worker's records: the status it last wrote, or LOST
// when its address lease is gone while the status says it was still working.
func (p *ControlPanel) WorkerStatus(ctx context.Context, worker string) (Status, error) {
	addr, err := p.repo.Get(ctx, p.trial.Worker(worker))
	if err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
		return Status{}, fmt.Errorf("control panel: status of %s: %w", worker, err)
	}
	rec, err := p.repo.Get(ctx, p.trial.Status(worker))
	if err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
		return Status{}, fmt.Errorf("control panel: status of %s: %w", worker, err)
	}
	if addr == "" && rec == "" {
		return Status{}, fmt.Errorf("control panel: %s in %s: %w", worker, p.trial.Prefix(), ErrWorkerNotFound)
	}
	return combineRecords(worker, addr, rec, time.Now(), p.opts.HungAfter), nil
}

// combineRecords derives a worker's status from its address record and its
// status record ("" where absent) at time now: LOST without the address,
// HUNG when the loop's heartbeat is older than hungAfter (if positive).
func combineRecords(worker, addr, rec string, now time.Time, hungAfter time.Duration) Status {
	if rec == "" {
		// Registered, first status not written yet; or neither record exists.
		st := Status{Name: worker, State: StateReady, Address: addr}
		if addr == "" {
			st.State = StateLost
		}
		return st
	}
	st, err := parseStatusRecord(rec)
	if err != nil {
		return Status{Name: worker, State: StateLost, Address: addr,
			Error: fmt.Sprintf("unreadable status record: %v", err)}
	}
	st.Name = worker  // the key, not the value, says whose record it is
	st.Address = addr // the leased record, not the status record, says where the worker is
	if addr == "" && !st.State.Final() {
		st.Error = fmt.Sprintf("address lease gone while %s", st.State)
		st.State = StateLost
	}
	if age := now.Sub(time.UnixMilli(st.HeartbeatMs)); addr != "" && !st.State.Final() &&
		st.HeartbeatMs > 0 && hungAfter > 0 && age > hungAfter {
		st.Error = fmt.Sprintf("%s but the loop has not turned for %v (bound %v)", st.State, age.Round(time.Millisecond), hungAfter)
		st.State = StateHung
	}
	return st
}

// Workers lists every worker of the trial that has an address or a status
// record, with its combined status, sorted by name.
func (p *ControlPanel) Workers(ctx context.Context) ([]Status, error) {
	addrs, err := p.findNamed(ctx, p.trial.WorkerPrefix())
	if err != nil {
		return nil, err
	}
	recs, err := p.findNamed(ctx, p.trial.StatusPrefix())
	if err != nil {
		return nil, err
	}
	all := map[string]bool{}
	for name := range addrs {
		all[name] = true
	}
	for name := range recs {
		all[name] = true
	}
	out := make([]Status, 0, len(all))
	now := time.Now()
	for name := range all {
		out = append(out, combineRecords(name, addrs[name], recs[name], now, p.opts.HungAfter))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// findNamed lists the records below prefix keyed by worker name.
func (p *ControlPanel) findNamed(ctx context.Context, prefix string) (map[string]string, error) {
	entries, err := p.repo.Find(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("control panel: list %s: %w", prefix, err)
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		out[strings.TrimPrefix(e.Key, prefix)] = e.Value
	}
	return out, nil
}

// Close closes every kept connection.
func (p *ControlPanel) Close() error {
	p.stopWatch()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for name, c := range p.clients {
		_ = c.Close()
		delete(p.clients, name)
	}
	return nil
}
