package etcd

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/distrl/distrl/nameresolve"
)

// progressTimeout bounds the wait for etcd's answer to a progress request.
// etcd answers at once while the watch is in step with the store, and drops
// the request while it is catching up; the mirror then starts over with a
// fresh watch and a listing, which answers the waiting Syncs. A variable
// for tests.
var progressTimeout = 250 * time.Millisecond

// mirrorStreams numbers the mirrors' gRPC streams: each has one of its own.
var mirrorStreams atomic.Uint64

// mirror is the Repository's Mirror: a watch on the prefix feeds the copy,
// and Sync is one progress request on the watch's stream. etcd answers it
// with its current revision only after every event up to that revision has
// been sent on the stream, so when the answer arrives the copy holds every
// change made before the request left: a linearizable read of the whole
// prefix for one round trip.
//
// One goroutine (run) owns the watch and applies its events; Syncs are
// served in rounds: the waiters that arrived while no request was out share
// the next one, and those that arrive meanwhile wait for the one after (an
// answer already on its way may predate them).
type mirror struct {
	r      *Repository
	prefix string
	ctx    context.Context // ends the mirror
	cancel context.CancelFunc
	syncs  chan chan error // Sync's waiters, to run
	done   chan struct{}   // closed when run returns

	mu      sync.RWMutex
	records map[string]string
	version uint64
}

// mirrorStream is one watch of the mirror's prefix on a stream of its own.
type mirrorStream struct {
	wch    clientv3.WatchChan
	sctx   context.Context // names the stream; progress requests go with it
	cancel context.CancelFunc
	// base is the revision of the listing that filled the copy: events up
	// to it are in the copy already.
	base int64
}

var _ nameresolve.Mirror = (*mirror)(nil)

// Mirror implements nameresolve.Repository. It returns once the copy holds
// the records of a first listing.
func (r *Repository) Mirror(ctx context.Context, prefix string) (nameresolve.Mirror, error) {
	if err := r.addGoroutine(); err != nil {
		return nil, r.wrap("mirror", prefix, err)
	}
	m := &mirror{r: r, prefix: prefix, syncs: make(chan chan error), done: make(chan struct{})}
	m.ctx, m.cancel = r.bind(context.Background()) // ctx bounds the opening only
	st, err := m.start(ctx)
	if err != nil {
		m.cancel()
		r.wg.Done()
		return nil, r.wrap("mirror", prefix, err)
	}
	go m.run(st)
	return m, nil
}

// start watches the prefix from etcd's current revision on a new stream
// (no other watch of this client can then hold back its progress answers,
// nor can an answer to an earlier stream's request be taken for ours), then
// lists the prefix into the copy. ctx, and bgTimeout, bound the start:
// until it is done the stream itself ends with them, since opening a watch
// waits for etcd.
func (m *mirror) start(ctx context.Context) (*mirrorStream, error) {
	id := strconv.FormatUint(mirrorStreams.Add(1), 10)
	sctx, cancel := context.WithCancelCause(metadata.AppendToOutgoingContext(m.ctx, "distrl-mirror", id))
	errTimeout := fmt.Errorf("mirror start: %w", context.DeadlineExceeded)
	timer := time.AfterFunc(bgTimeout, func() { cancel(errTimeout) })
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	fail := func(err error) (*mirrorStream, error) {
		timer.Stop()
		stop()
		cause := context.Cause(sctx) // why the stream ended, if it did: the bound's error, not ours
		cancel(nil)
		return nil, cmp.Or(cause, err)
	}
	// Started at the current revision, not at the listing's: see Wait.
	wch := m.r.cli.Watch(sctx, m.prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if _, err := created(sctx, wch); err != nil {
		return fail(err)
	}
	resp, err := m.r.cli.Get(sctx, m.prefix, clientv3.WithPrefix())
	if err != nil {
		return fail(err)
	}
	if timerOK, ctxOK := timer.Stop(), stop(); !timerOK || !ctxOK {
		return fail(cmp.Or(ctx.Err(), errTimeout)) // the bound ended just as the listing came
	}
	records := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		records[string(kv.Key)] = string(kv.Value)
	}
	m.mu.Lock()
	m.records = records
	m.version++
	m.mu.Unlock()
	return &mirrorStream{wch: wch, sctx: sctx, cancel: func() { cancel(nil) }, base: resp.Header.Revision}, nil
}

// run applies the watch's events and serves Syncs until the mirror ends,
// starting over (watch and listing) whenever the watch breaks or a progress
// request goes unanswered.
func (m *mirror) run(st *mirrorStream) {
	defer m.r.wg.Done()
	defer close(m.done)
	var round, pending []chan error // waiting on the request out; waiting for the next
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	answer := func(ws []chan error, err error) {
		for _, w := range ws {
			w <- err // buffered: never blocks
		}
	}
	backoff := minBackoff
	for {
		if st == nil {
			timer.Stop()
			var err error
			st, err = m.start(m.ctx)
			// The listing is newer than every waiter so far.
			answer(round, err)
			answer(pending, err)
			round, pending = nil, nil
			if err != nil {
				m.r.log.Debug("name resolve: mirror cannot restart; retrying", "prefix", m.prefix, "err", err)
				if !m.refuse(backoff, err) {
					return
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			backoff = minBackoff
		}
		select {
		case w := <-m.syncs:
			pending = append(pending, w)
		case wr, ok := <-st.wch:
			switch {
			case !ok || wr.Canceled || wr.CompactRevision != 0 || wr.Err() != nil:
				// Broken or fallen behind compaction: the copy may miss changes.
				st.cancel()
				st = nil
				continue
			case wr.IsProgressNotify():
				if round != nil {
					timer.Stop()
					answer(round, nil)
					round = nil
				}
			default:
				m.apply(st.base, wr.Events)
			}
		case <-timer.C:
			// etcd dropped the request (the watch was catching up).
			st.cancel()
			st = nil
			continue
		case <-m.ctx.Done():
			st.cancel()
			answer(round, nameresolve.ErrClosed)
			answer(pending, nameresolve.ErrClosed)
			return
		}
		if round == nil && len(pending) > 0 {
			round, pending = pending, nil
			if err := m.r.cli.RequestProgress(st.sctx); err != nil {
				st.cancel()
				st = nil
				continue
			}
			timer.Reset(progressTimeout)
		}
	}
}

// refuse waits out a restart's backoff, failing every Sync meanwhile with
// err (so that callers fall back on the copy at once), and reports false if
// the mirror ended.
func (m *mirror) refuse(d time.Duration, err error) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case w := <-m.syncs:
			w <- err
		case <-t.C:
			return true
		case <-m.ctx.Done():
			return false
		}
	}
}

// apply puts the events after base into the copy.
func (m *mirror) apply(base int64, events []*clientv3.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range events {
		if ev.Kv.ModRevision <= base {
			continue
		}
		if ev.Type == clientv3.EventTypeDelete {
			delete(m.records, string(ev.Kv.Key))
		} else {
			m.records[string(ev.Kv.Key)] = string(ev.Kv.Value)
		}
		m.version++
	}
}

// Sync implements nameresolve.Mirror.
func (m *mirror) Sync(ctx context.Context) error {
	w := make(chan error, 1)
	select {
	case m.syncs <- w:
	case <-m.done:
		return m.r.wrap("sync mirror", m.prefix, nameresolve.ErrClosed)
	case <-ctx.Done():
		return m.r.wrap("sync mirror", m.prefix, ctx.Err())
	}
	select {
	case err := <-w:
		return m.r.wrap("sync mirror", m.prefix, err)
	case <-ctx.Done():
		return m.r.wrap("sync mirror", m.prefix, ctx.Err())
	}
}

// Get implements nameresolve.Mirror.
func (m *mirror) Get(key string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.records[key]
	return v, ok
}

// Entries implements nameresolve.Mirror.
func (m *mirror) Entries() []nameresolve.Entry {
	m.mu.RLock()
	out := make([]nameresolve.Entry, 0, len(m.records))
	for k, v := range m.records {
		out = append(out, nameresolve.Entry{Key: k, Value: v})
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Version implements nameresolve.Mirror.
func (m *mirror) Version() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.version
}

// Close implements nameresolve.Mirror.
func (m *mirror) Close() error {
	m.cancel()
	<-m.done
	return nil
}
