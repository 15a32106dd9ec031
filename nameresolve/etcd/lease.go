package etcd

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distrl/distrl/nameresolve"
)

// lease is the repository's lease for one TTL. Its fields are guarded by
// Repository.mu.
type lease struct {
	ttl   time.Duration
	id    clientv3.LeaseID   // 0 while being (re)granted
	ready chan struct{}      // closed once id is valid; replaced when the lease is lost
	stop  context.CancelFunc // ends the current keep-alive
}

// ttlSeconds is etcd's whole-second TTL for d, rounded up.
func ttlSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// leaseFor returns the live lease for ttl, starting its keeper on first use
// and waiting, bounded by ctx, while it is being (re)granted.
func (r *Repository) leaseFor(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return 0, nameresolve.ErrClosed
		}
		l := r.leases[ttl]
		if l == nil {
			l = &lease{ttl: ttl, ready: make(chan struct{})}
			r.leases[ttl] = l
			r.wg.Add(1) // under mu, after the closed check: Close cannot be waiting yet
			go r.keepLease(l)
		}
		id, ready := l.id, l.ready
		r.mu.Unlock()
		if id != 0 {
			return id, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// leaseLost marks the lease for ttl lost if it is still id, e.g. after a put
// on it failed with "lease not found" before the keep-alive noticed.
func (r *Repository) leaseLost(ttl time.Duration, id clientv3.LeaseID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.leases[ttl]; l != nil && l.id == id {
		l.id = 0
		l.ready = make(chan struct{})
		l.stop()
	}
}

// keepLease grants l, keeps it alive, and whenever the keep-alive ends
// before Close (lease expired while etcd was unreachable, etcd restarted
// from a snapshot without it, or the lease was revoked), grants a new one
// and re-adds the records that were on it.
func (r *Repository) keepLease(l *lease) {
	defer r.wg.Done()
	backoff := minBackoff
	for {
		id, ka, stop, err := r.grant(l.ttl)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.log.Debug("name resolve: lease grant failed; retrying", "ttl", l.ttl, "in", backoff, "err", err)
			if !sleep(r.ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff

		r.mu.Lock()
		l.id, l.stop = id, stop
		close(l.ready)
		r.mu.Unlock()
		r.readd(l.ttl, id)

		for range ka {
			// Each response is a renewal; the channel closes when the lease is lost.
		}
		stop()
		if r.ctx.Err() != nil {
			return // closing: keep l.id for Close to revoke
		}
		r.mu.Lock()
		if l.id == id {
			l.id = 0
			l.ready = make(chan struct{})
		}
		r.mu.Unlock()
		r.log.Warn("name resolve: etcd lease lost; granting a new one and re-adding its records",
			"ttl", l.ttl, "lease", int64(id))
	}
}

// grant grants a lease of ttl and starts its keep-alive.
func (r *Repository) grant(ttl time.Duration) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, context.CancelFunc, error) {
	r.mu.Lock()
	lessor := r.lessor
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.ctx, bgTimeout)
	g, err := lessor.Grant(ctx, ttlSeconds(ttl))
	cancel()
	if err != nil {
		return 0, nil, nil, err
	}
	kctx, stop := context.WithCancel(r.ctx)
	ka, err := lessor.KeepAlive(kctx, g.ID)
	if err != nil {
		stop()
		var halted clientv3.ErrKeepAliveHalted
		if errors.As(err, &halted) {
			r.renewLessor(lessor)
		}
		return 0, nil, nil, err
	}
	return g.ID, ka, stop, nil
}

// renewLessor replaces a lessor whose keep-alive loop has halted for good
// (it then refuses every KeepAlive) with a fresh one.
func (r *Repository) renewLessor(old clientv3.Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lessor == old && !r.closed {
		_ = old.Close()
		r.lessor = clientv3.NewLease(r.cli)
	}
}

// readd writes again, on lease id, the records this repository added with
// ttl. It holds wmu so that none of our own writes interleave, and each put
// is conditional: only if the key is missing (expired) or still holds our
// last write. A record someone else rewrote is theirs now and is forgotten.
// Failures are logged only: they mean etcd broke again, and the keep-alive
// will notice and bring us back here.
func (r *Repository) readd(ttl time.Duration, id clientv3.LeaseID) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	type item struct {
		key string
		o   *ownedRecord
	}
	var items []item
	r.mu.Lock()
	for k, o := range r.owned {
		if o.opts.TTL == ttl {
			items = append(items, item{k, o})
		}
	}
	r.mu.Unlock()

	for _, it := range items {
		ctx, cancel := context.WithTimeout(r.ctx, bgTimeout)
		put := clientv3.OpPut(it.key, it.o.value, clientv3.WithLease(id))
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(it.key), "=", it.o.rev)).
			Then(put).
			Else(clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(it.key), "=", 0)},
				[]clientv3.Op{put}, nil)).
			Commit()
		cancel()
		if err != nil {
			r.log.Warn("name resolve: re-adding record failed", "key", it.key, "err", err)
			return
		}
		ours := resp.Succeeded || resp.Responses[0].GetResponseTxn().GetSucceeded()
		r.mu.Lock()
		if ours {
			it.o.rev = resp.Header.Revision
		} else if r.owned[it.key] == it.o {
			delete(r.owned, it.key)
		}
		r.mu.Unlock()
	}
}

// sleep waits d or until ctx ends, reporting whether it waited the full d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
