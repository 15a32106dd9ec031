package etcd

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distrl/distrl/nameresolve"
)

// Wait implements nameresolve.Repository: a Get, and if the key is missing,
// a watch, then a second Get to close the gap between the two. Nothing polls.
//
// The watch starts at etcd's current revision, and the second Get happens
// only once etcd has confirmed it: a watch asked to start at an older
// revision lands in etcd's "unsynced" group, which is caught up only every
// 100 ms, and a name published just as the Wait started would take that long.
func (r *Repository) Wait(ctx context.Context, key string) (string, error) {
	if err := r.checkOpen(); err != nil {
		return "", r.wrap("wait for", key, err)
	}
	ctx, cancel := r.bind(ctx)
	defer cancel()
	if v, ok, err := r.get(ctx, key); err != nil || ok {
		return v, r.wrap("wait for", key, err)
	}
	backoff := minBackoff
	for {
		v, ok, err := r.waitOnce(ctx, key)
		if err != nil || ok {
			return v, r.wrap("wait for", key, err)
		}
		// The watch ended without a put (history compacted, stream broken):
		// try again, after a pause in case it keeps breaking.
		if !sleep(ctx, backoff) {
			return "", r.wrap("wait for", key, ctx.Err())
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// get reads key, reporting whether it exists.
func (r *Repository) get(ctx context.Context, key string) (string, bool, error) {
	resp, err := r.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", false, err
	}
	return string(resp.Kvs[0].Value), true, nil
}

// waitOnce watches key from now, reads it, and if it is still missing waits
// for the first put. It reports false with no error if the watch ended first.
func (r *Repository) waitOnce(ctx context.Context, key string) (string, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the watch when we return
	wch := r.cli.Watch(ctx, key, clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
	if _, err := created(ctx, wch); err != nil {
		return "", false, err
	}
	if v, ok, err := r.get(ctx, key); err != nil || ok {
		return v, ok, err
	}
	for wr := range wch {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				return string(ev.Kv.Value), true, nil
			}
		}
	}
	return "", false, ctx.Err()
}

// created waits for the watch's creation notice and returns the revision it
// starts after.
func created(ctx context.Context, wch clientv3.WatchChan) (int64, error) {
	select {
	case wr, ok := <-wch:
		switch {
		case !ok:
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return 0, errors.New("watch closed before it was created")
		case wr.Err() != nil:
			return 0, wr.Err()
		case !wr.Created:
			return 0, errors.New("watch sent events before its creation notice")
		}
		return wr.Header.Revision, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Watch implements nameresolve.Repository. Every change made after Watch
// returns is delivered: Watch returns once etcd has created the watch.
//
// If etcd cancels the watch (its history was compacted past us, or the
// stream broke) Watch resumes it by itself: from just after the last
// delivered event when that history still exists, otherwise from the
// oldest revision etcd still has, and the changes compacted away in between
// are lost. The channel closes only when ctx ends or the repository closes.
func (r *Repository) Watch(ctx context.Context, prefix string) (<-chan nameresolve.Event, error) {
	if err := r.addGoroutine(); err != nil {
		return nil, r.wrap("watch", prefix, err)
	}

	wctx, cancel := r.bind(ctx)
	// Started at etcd's current revision, not at one read earlier: see Wait.
	wch := r.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	rev, err := created(wctx, wch)
	if err != nil {
		cancel()
		r.wg.Done()
		return nil, r.wrap("watch", prefix, err)
	}
	out := make(chan nameresolve.Event)
	go r.watchLoop(wctx, cancel, prefix, wch, rev+1, out)
	return out, nil
}

// watchLoop forwards changes below prefix from wch, re-watching from
// revision next whenever etcd cancels the watch, until ctx ends.
func (r *Repository) watchLoop(ctx context.Context, cancel context.CancelFunc, prefix string,
	wch clientv3.WatchChan, next int64, out chan<- nameresolve.Event) {
	defer r.wg.Done()
	defer close(out)
	defer cancel()
	backoff := minBackoff
	for {
		for wr := range wch {
			if wr.CompactRevision != 0 {
				r.log.Warn("name resolve: watch fell behind etcd's compaction; changes were lost",
					"prefix", prefix, "from", next, "resume", wr.CompactRevision)
				next = wr.CompactRevision
			}
			if err := wr.Err(); err != nil && !errors.Is(err, context.Canceled) {
				r.log.Debug("name resolve: watch canceled by etcd; resuming", "prefix", prefix, "err", err)
			}
			for _, ev := range wr.Events {
				select {
				case out <- translate(ev):
				case <-ctx.Done():
					return
				}
				next = ev.Kv.ModRevision + 1
				backoff = minBackoff
			}
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
		wch = r.cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(next))
	}
}

// translate turns an etcd event into a nameresolve one.
func translate(ev *clientv3.Event) nameresolve.Event {
	if ev.Type == clientv3.EventTypeDelete {
		return nameresolve.Event{Type: nameresolve.EventDelete, Key: string(ev.Kv.Key)}
	}
	return nameresolve.Event{Type: nameresolve.EventPut, Key: string(ev.Kv.Key), Value: string(ev.Kv.Value)}
}
