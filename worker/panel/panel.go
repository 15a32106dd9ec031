package panel

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
	"github.com/distrl/distrl/worker/member"
	"github.com/vmihailenco/msgpack/v5"
)

// ErrWorkerNotFound: no live address record for the worker.
var ErrWorkerNotFound = errors.New("worker not found")

// Options configure a ControlPanel.
type Options struct {
	// Curve holds the keys for workers that run with CURVE; nil for plaintext.
	Curve *rpc.CurveClientKeys
	// HungAfter is how old a live worker's loop heartbeat may be before
	// the panel reports it HUNG: DefaultHungAfter if zero, negative: never.
	// Hosts' clocks must agree to well within it.
	HungAfter time.Duration
}

// DefaultHungAfter is Options.HungAfter's default: 30 heartbeats.
const DefaultHungAfter = 30 * time.Second

// ControlPanel drives the workers of one trial: it resolves their names,
// keeps one connection per address (the workers one process hosts share
// one) and makes plain, async and group requests, each naming its worker.
// It is safe for concurrent use.
type ControlPanel struct {
	repo  nameresolve.Repository
	trial names.Trial
	opts  Options

	mu      sync.Mutex
	clients map[string]*rpc.Client // by address
	last    map[string]string      // each worker's address when last resolved
	closed  bool

	mirrorMu sync.Mutex
	mirrors  map[string]nameresolve.Mirror // by prefix, each opened on first use
	pruned   uint64                        // the address mirror's Version when the clients were last pruned
}

// New returns a panel for the workers of trial.
func New(repo nameresolve.Repository, trial names.Trial, opts Options) *ControlPanel {
	if opts.HungAfter == 0 {
		opts.HungAfter = DefaultHungAfter
	}
	return &ControlPanel{repo: repo, trial: trial, opts: opts, clients: map[string]*rpc.Client{}, last: map[string]string{}}
}

// Trial is the key space the panel works in.
func (p *ControlPanel) Trial() names.Trial { return p.trial }

// Connect waits until every named worker has registered (bounded by ctx) and
// connects to it.
func (p *ControlPanel) Connect(ctx context.Context, workers ...string) error {
	for _, name := range workers {
		addr, err := p.repo.Wait(ctx, p.trial.Worker(name))
		if err != nil {
			return fmt.Errorf("control panel: waiting for %s: %w", name, err)
		}
		if _, err := p.connect(addr); err != nil {
			return fmt.Errorf("control panel: connect %s: %w", name, err)
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
		if _, err := p.connect(addr); err != nil {
			return nil, fmt.Errorf("control panel: connect %s: %w", name, err)
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// connect returns the kept client of addr, dialling it on first use.
func (p *ControlPanel) connect(addr string) (*rpc.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("control panel: %w", rpc.ErrClosed)
	}
	if c, ok := p.clients[addr]; ok {
		return c, nil
	}
	c, err := rpc.Dial(addr, rpc.ClientOptions{Curve: p.opts.Curve})
	if err != nil {
		return nil, fmt.Errorf("control panel: dial %s: %w", addr, err)
	}
	p.clients[addr] = c
	return c, nil
}

// client returns the connection to name's address as its record holds it
// now. The name is resolved on every request, not cached: a worker
// restarted at a new address must not get requests at its old one (the
// old address may be taken by another process by then, which refuses a
// request for a worker it does not serve). Once a group request has opened
// the mirror of the address records, a synced mirror answers; before, a
// Get. While the name server cannot be reached, the address last used for
// name is tried.
func (p *ControlPanel) client(ctx context.Context, name string) (*rpc.Client, error) {
	p.mirrorMu.Lock()
	m := p.mirrors[p.trial.WorkerPrefix()]
	p.mirrorMu.Unlock()
	if m != nil {
		addr, err := p.lookup(ctx, m)(name)
		return p.resolved(name, addr, err)
	}
	addr, err := p.repo.Get(ctx, p.trial.Worker(name))
	return p.resolved(name, addr, err)
}

// addressLookup gives a worker's address as resolve found it, or the
// lookup's error (nameresolve.ErrNotFound: the worker has no record).
type addressLookup func(name string) (string, error)

// addresses resolves every worker's address as of now for one group
// request: one Sync of the mirror of the address records, a round trip to
// the name server whatever the number of workers; where the mirror cannot
// be opened, one listing. It also closes the connections no worker uses
// any more.
func (p *ControlPanel) addresses(ctx context.Context) addressLookup {
	m, err := p.openMirror(ctx, p.trial.WorkerPrefix())
	if err != nil {
		addrs, err := p.findNamed(ctx, p.trial.WorkerPrefix())
		if err == nil {
			p.prune(addrs)
		}
		return func(name string) (string, error) {
			if addr := addrs[name]; addr != "" || err != nil {
				return addr, err
			}
			return "", nameresolve.ErrNotFound
		}
	}
	return p.lookup(ctx, m)
}

// lookup syncs m and reads the addresses from it, pruning the connections
// when the records changed since the last prune.
func (p *ControlPanel) lookup(ctx context.Context, m nameresolve.Mirror) addressLookup {
	if err := m.Sync(ctx); err != nil {
		err = fmt.Errorf("control panel: resolve: %w", err)
		return func(string) (string, error) { return "", err }
	}
	p.mirrorMu.Lock()
	v := m.Version()
	changed := v != p.pruned
	p.pruned = v
	p.mirrorMu.Unlock()
	if changed {
		live := map[string]string{}
		for _, e := range m.Entries() {
			live[e.Key] = e.Value
		}
		p.prune(live)
	}
	return func(name string) (string, error) {
		if addr, ok := m.Get(p.trial.Worker(name)); ok {
			return addr, nil
		}
		return "", nameresolve.ErrNotFound
	}
}

// openMirror returns the panel's mirror of the records below prefix,
// opening it on first use, within ctx (an open that fails is tried again
// next time). The mirror lives as long as the panel.
func (p *ControlPanel) openMirror(ctx context.Context, prefix string) (nameresolve.Mirror, error) {
	p.mirrorMu.Lock()
	defer p.mirrorMu.Unlock()
	if m := p.mirrors[prefix]; m != nil {
		return m, nil
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("control panel: %w", rpc.ErrClosed)
	}
	m, err := p.repo.Mirror(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("control panel: %w", err)
	}
	if p.mirrors == nil {
		p.mirrors = map[string]nameresolve.Mirror{}
	}
	p.mirrors[prefix] = m
	return m, nil
}

// resolved is client's choice once the address lookup returned addr, err.
func (p *ControlPanel) resolved(name, addr string, err error) (*rpc.Client, error) {
	switch {
	case errors.Is(err, nameresolve.ErrNotFound):
		return nil, fmt.Errorf("control panel: %s in %s: %w", name, p.trial.Prefix(), ErrWorkerNotFound)
	case err != nil:
		p.mu.Lock()
		addr = p.last[name]
		p.mu.Unlock()
		if addr == "" {
			return nil, fmt.Errorf("control panel: resolve %s: %w", name, err)
		}
	default:
		p.mu.Lock()
		p.last[name] = addr
		p.mu.Unlock()
	}
	return p.connect(addr)
}

// prune closes the clients of addresses no worker of live holds any more
// (live: a listing of every address record of the trial).
func (p *ControlPanel) prune(live map[string]string) {
	used := make(map[string]bool, len(p.clients))
	for _, addr := range live {
		used[addr] = true
	}
	p.mu.Lock()
	var stale []*rpc.Client
	for addr, c := range p.clients {
		if !used[addr] {
			stale = append(stale, c)
			delete(p.clients, addr)
		}
	}
	p.mu.Unlock()
	for _, c := range stale {
		_ = c.Close() // waits for a request in flight on it, bounded by that request's ctx
	}
}

// Request sends command to worker and decodes the reply into reply (nil discards it).
func (p *ControlPanel) Request(ctx context.Context, worker, command string, kwargs, reply any) error {
	done, err := p.requestCached(ctx, worker, command, kwargs, reply)
	if done {
		return err
	}
	c, err := p.client(ctx, worker)
	if err != nil {
		return err
	}
	if err := c.RequestTo(ctx, worker, command, kwargs, reply); err != nil {
		return fmt.Errorf("%s %s: %w", worker, command, err)
	}
	return nil
}

// recheckAfter is how long a request sent to a worker's cached address
// waits for its reply before the panel asks the name server whether the
// address still holds the worker. Commands that take longer pay one Sync
// of the mirror then; a request to a restarted worker's old address, where
// nothing answers, is redirected after this long.
const recheckAfter = 50 * time.Millisecond

// requestCached sends a request to worker's address as the panel's mirror
// of the address records holds it, without a round trip to the name
// server: the mirror follows the records through a watch, and is behind
// them only for the watch's lag after a change. A request that meets a
// stale address is found out and not executed: a process that took the
// old address does not serve the worker (unknown_worker), and where
// nothing answers the reply is overdue after recheckAfter, when a Sync
// shows the record moved (the request is then abandoned, its socket
// discarded). In both cases done is false and the caller resolves the
// name afresh. done is false too where the mirror cannot say (not open
// yet and cannot be opened, or no record of worker in it yet).
func (p *ControlPanel) requestCached(ctx context.Context, worker, command string, kwargs, reply any) (done bool, err error) {
	m, err := p.openMirror(ctx, p.trial.WorkerPrefix())
	if err != nil {
		return false, nil
	}
	key := p.trial.Worker(worker)
	addr, ok := m.Get(key)
	if !ok {
		return false, nil
	}
	c, err := p.connect(addr)
	if err != nil {
		return true, err
	}
	moved := func() bool {
		if err := m.Sync(ctx); err != nil {
			return false // the name server cannot say: keep to the address
		}
		now, ok := m.Get(key)
		return !ok || now != addr
	}
	err = c.RequestToRecheck(ctx, worker, command, kwargs, reply, rpc.Recheck{
		After: recheckAfter, Still: func() bool { return !moved() },
	})
	switch {
	case err == nil:
		p.mu.Lock()
		p.last[worker] = addr
		p.mu.Unlock()
		return true, nil
	case errors.Is(err, rpc.ErrAbandoned), errors.Is(err, rpc.ErrUnknownWorker) && moved():
		return false, nil
	}
	return true, fmt.Errorf("%s %s: %w", worker, command, err)
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
	calls := make([]rpc.Call, len(workers))
	do := make([]*rpc.Call, 0, len(workers))
	lookup := p.addresses(ctx) // resolves every worker at once, as client does one
	for i, w := range workers {
		results[i].Worker = w
		addr, err := lookup(w)
		c, err := p.resolved(w, addr, err)
		if err != nil {
			results[i].Err = err
			continue
		}
		calls[i] = rpc.Call{Client: c, Target: w, Command: command, Kwargs: kwargs[i], Reply: &results[i].Reply}
		do = append(do, &calls[i])
	}
	rpc.Do(ctx, do)
	for i := range calls {
		if err := calls[i].Err; err != nil {
			results[i].Err = fmt.Errorf("%s %s: %w", workers[i], command, err)
		}
	}
	return results
}

// WorkerStatus reads a worker's records: the status it last wrote, or LOST
// when its address lease is gone while the status says it was still working.
func (p *ControlPanel) WorkerStatus(ctx context.Context, worker string) (member.Status, error) {
	get := func(key string) (string, error) {
		v, err := p.repo.Get(ctx, key)
		if err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
			return "", fmt.Errorf("control panel: status of %s: %w", worker, err)
		}
		return v, nil
	}
	addr, err := get(p.trial.Worker(worker))
	if err != nil {
		return member.Status{}, err
	}
	rec, err := get(p.trial.Status(worker))
	if err != nil {
		return member.Status{}, err
	}
	if addr == "" && rec == "" {
		return member.Status{}, fmt.Errorf("control panel: %s in %s: %w", worker, p.trial.Prefix(), ErrWorkerNotFound)
	}
	loops := map[string]string{}
	if st, err := member.ParseStatusRecord(rec); err == nil && st.Loop != "" {
		if loops[st.Loop], err = get(p.trial.Loop(st.Loop)); err != nil {
			return member.Status{}, err
		}
	}
	return combineRecords(worker, addr, rec, loops, time.Now(), p.opts.HungAfter), nil
}

// combineRecords derives a worker's status from its address record, its
// status record ("" where absent) and the loop records (by name) at time
// now: LOST without the address, HUNG when the heartbeat of its loop is
// older than hungAfter (if positive).
func combineRecords(worker, addr, rec string, loops map[string]string, now time.Time, hungAfter time.Duration) member.Status {
	if rec == "" {
		// Registered, first status not written yet; or neither record exists.
		st := member.Status{Name: worker, State: member.StateReady, Address: addr}
		if addr == "" {
			st.State = member.StateLost
		}
		return st
	}
	st, err := member.ParseStatusRecord(rec)
	if err != nil {
		return member.Status{Name: worker, State: member.StateLost, Address: addr,
			Error: fmt.Sprintf("unreadable status record: %v", err)}
	}
	st.Name = worker  // the key, not the value, says whose record it is
	st.Address = addr // the leased record, not the status record, says where the worker is
	if st.Loop != "" {
		// The loop's own record, not the copy in the status record, says
		// when it last turned; none yet (or unreadable): not known.
		lr, _ := member.ParseLoopRecord(loops[st.Loop])
		st.Loops, st.HeartbeatMs = lr.Loops, lr.HeartbeatMs
	}
	if addr == "" && !st.State.Final() {
		st.Error = fmt.Sprintf("address lease gone while %s", st.State)
		st.State = member.StateLost
	}
	if age := now.Sub(time.UnixMilli(st.HeartbeatMs)); addr != "" && !st.State.Final() &&
		st.HeartbeatMs > 0 && hungAfter > 0 && age > hungAfter {
		st.Error = fmt.Sprintf("%s but the loop has not turned for %v (bound %v)", st.State, age.Round(time.Millisecond), hungAfter)
		st.State = member.StateHung
	}
	return st
}

// Workers lists every worker of the trial that has an address or a status
// record, with its combined status, sorted by name: it reads the address,
// status and loop records from the panel's mirrors of them, synced (three
// round trips to the name server whatever the number of workers; the
// first call lists them to fill the mirrors).
func (p *ControlPanel) Workers(ctx context.Context) ([]member.Status, error) {
	var recs [3]map[string]string
	for i, prefix := range []string{p.trial.WorkerPrefix(), p.trial.StatusPrefix(), p.trial.LoopPrefix()} {
		var err error
		if recs[i], err = p.records(ctx, prefix); err != nil {
			return nil, err
		}
	}
	addrs, statuses, loops := recs[0], recs[1], recs[2]
	all := map[string]bool{}
	for name := range addrs {
		all[name] = true
	}
	for name := range statuses {
		all[name] = true
	}
	out := make([]member.Status, 0, len(all))
	now := time.Now()
	for name := range all {
		out = append(out, combineRecords(name, addrs[name], statuses[name], loops, now, p.opts.HungAfter))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Addresses returns the address of every registered worker of the trial,
// by name, from the panel's synced mirror of the address records: one
// round trip to the name server whatever the number of workers.
func (p *ControlPanel) Addresses(ctx context.Context) (map[string]string, error) {
	return p.records(ctx, p.trial.WorkerPrefix())
}

// records reads the records below prefix, keyed by worker name, from the
// panel's mirror of them once synced; where no mirror can be opened, from
// a listing.
func (p *ControlPanel) records(ctx context.Context, prefix string) (map[string]string, error) {
	m, err := p.openMirror(ctx, prefix)
	if err != nil {
		return p.findNamed(ctx, prefix)
	}
	if err := m.Sync(ctx); err != nil {
		return nil, fmt.Errorf("control panel: read %s: %w", prefix, err)
	}
	return byName(m.Entries(), prefix), nil
}

// findNamed lists the records below prefix keyed by worker name.
func (p *ControlPanel) findNamed(ctx context.Context, prefix string) (map[string]string, error) {
	entries, err := p.repo.Find(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("control panel: list %s: %w", prefix, err)
	}
	return byName(entries, prefix), nil
}

// byName keys the entries below prefix by the rest of their key: the worker's name.
func byName(entries []nameresolve.Entry, prefix string) map[string]string {
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		out[strings.TrimPrefix(e.Key, prefix)] = e.Value
	}
	return out
}

// Close closes every kept connection and the mirrors.
func (p *ControlPanel) Close() error {
	p.mirrorMu.Lock() // first: openMirror sees closed, or its mirror is closed here
	defer p.mirrorMu.Unlock()
	p.mu.Lock()
	p.closed = true
	for addr, c := range p.clients {
		_ = c.Close()
		delete(p.clients, addr)
	}
	p.mu.Unlock()
	for prefix, m := range p.mirrors {
		_ = m.Close()
		delete(p.mirrors, prefix)
	}
	return nil
}
