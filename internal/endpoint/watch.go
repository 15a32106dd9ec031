package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	zmq "github.com/pebbe/zmq4"
)

// Backoff between attempts to re-establish a broken name-resolve watch.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// Peers keeps a connecting socket connected to every endpoint registered
// under a name-resolve prefix.
//
// A goroutine follows the prefix (Watch, then Find to close the gap between
// the initial listing and the watch) and hands the latest complete snapshot
// to the owner through a channel of capacity one, replacing any snapshot
// the owner has not taken yet. The owner calls sync from the goroutine that
// owns the socket, so connects and disconnects never race with sends.
// Snapshots rather than events keep the handover trivially correct when a
// broken watch is re-established: the owner just converges on the newest
// view.
type Peers struct {
	*Watch
	sock      *zmq.Socket
	connected map[string]bool // endpoints; owner goroutine only
	// Last is the snapshot applied last.
	Last map[string]string
	// Observe, if set, sees every snapshot applied (the inference client
	// attaches shared-memory channels to the records that offer one).
	Observe func(snap map[string]string)
}

// Watch follows a name-resolve prefix on a goroutine of its own and
// hands the newest snapshot (key -> address) to its owner through a channel
// of capacity one.
type Watch struct {
	log     *slog.Logger
	updates chan map[string]string // key -> endpoint; the newest snapshot
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewWatch lists the prefix once (bounded by ctx) and returns that
// listing, then starts the watch goroutine, which lives until close.
func NewWatch(ctx context.Context, repo nameresolve.Repository, prefix string, log *slog.Logger) (*Watch, map[string]string, error) {
	entries, err := repo.Find(ctx, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("find endpoints under %q: %w", prefix, err)
	}
	// The watch outlives ctx, which only bounds construction.
	wctx, cancel := context.WithCancel(context.Background())
	w := &Watch{log: log, updates: make(chan map[string]string, 1), cancel: cancel, done: make(chan struct{})}
	go w.follow(wctx, repo, prefix)
	return w, snapshot(entries), nil
}

// NewPeers lists the prefix once (bounded by ctx) and connects sock to
// what it finds, so that a new client is usable at once, then starts the
// watch goroutine, which lives until close.
func NewPeers(ctx context.Context, repo nameresolve.Repository, prefix string, sock *zmq.Socket, log *slog.Logger) (*Peers, error) {
	w, snap, err := NewWatch(ctx, repo, prefix, log)
	if err != nil {
		return nil, err
	}
	p := &Peers{Watch: w, sock: sock, connected: map[string]bool{}}
	p.Apply(snap)
	return p, nil
}

// snapshot turns Find's entries into key -> endpoint.
func snapshot(entries []nameresolve.Entry) map[string]string {
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		m[e.Key] = e.Value
	}
	return m
}

// follow runs the watch until ctx ends or the repository closes,
// re-establishing it with backoff when it breaks.
func (p *Watch) follow(ctx context.Context, repo nameresolve.Repository, prefix string) {
	defer close(p.done)
	backoff := watchRetryMin
	for {
		events, err := repo.Watch(ctx, prefix)
		if err == nil {
			var entries []nameresolve.Entry
			if entries, err = repo.Find(ctx, prefix); err == nil {
				snap := snapshot(entries)
				p.publish(snap)
				backoff = watchRetryMin
				for ev := range events {
					// Copy on write: the owner may hold the previous map.
					snap = maps.Clone(snap)
					switch ev.Type {
					case nameresolve.EventPut:
						snap[ev.Key] = ev.Value
					case nameresolve.EventDelete:
						delete(snap, ev.Key)
					}
					p.publish(snap)
				}
			}
		}
		if ctx.Err() != nil || errors.Is(err, nameresolve.ErrClosed) {
			return
		}
		if err != nil {
			p.log.Warn("watching endpoints failed; retrying", "prefix", prefix, "err", err, "retry_in", backoff)
		}
		// A watch channel that closed without an error (the backend
		// dropped it) is retried after the same backoff, so a backend that
		// keeps closing watches cannot make this loop spin.
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchRetryMax)
	}
}

// publish replaces any snapshot the owner has not taken yet. It never
// blocks: follow is the only sender, so after the drain the buffer has room.
func (p *Watch) publish(snap map[string]string) {
	select {
	case <-p.updates:
	default:
	}
	p.updates <- snap
}

// take returns the newest snapshot if one arrived since the last take.
func (p *Watch) Take() (map[string]string, bool) {
	select {
	case snap := <-p.updates:
		return snap, true
	default:
		return nil, false
	}
}

// sync applies the newest snapshot, if one arrived, and returns the number
// of connected endpoints. Owner goroutine only.
func (p *Peers) Sync() int {
	if snap, ok := p.Take(); ok {
		p.Apply(snap)
	}
	return len(p.connected)
}

// apply connects to new endpoints and disconnects from vanished ones.
func (p *Peers) Apply(snap map[string]string) {
	p.Last = snap
	if p.Observe != nil {
		p.Observe(snap)
	}
	want := make(map[string]bool, len(snap))
	for key, v := range snap {
		ep := zsock.Endpoint(v)
		want[ep] = true
		if p.connected[ep] {
			continue
		}
		if err := p.sock.Connect(ep); err != nil {
			// A bad record is skipped, not fatal: the other endpoints
			// still work, and a corrected record arrives as a new snapshot.
			p.log.Warn("cannot connect to a registered endpoint", "key", key, "endpoint", ep, "err", err)
			continue
		}
		p.log.Debug("connected", "key", key, "endpoint", ep)
		p.connected[ep] = true
	}
	for ep := range p.connected {
		if want[ep] {
			continue
		}
		if err := p.sock.Disconnect(ep); err != nil {
			p.log.Debug("disconnect", "endpoint", ep, "err", err)
		}
		p.log.Debug("disconnected", "endpoint", ep)
		delete(p.connected, ep)
	}
}

// close stops the watch goroutine and waits for it.
func (p *Watch) Close() {
	p.cancel()
	<-p.done
}
