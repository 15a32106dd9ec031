package etcd

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distrl/distrl/nameresolve"
)

// Add implements nameresolve.Repository. Without opts.Replace it is a
// transaction that writes only if the key does not exist.
func (r *Repository) Add(ctx context.Context, key, value string, opts nameresolve.AddOptions) error {
	if key == "" {
		return errEmptyKey
	}
	if err := r.checkOpen(); err != nil {
		return r.wrap("add", key, err)
	}
	ctx, cancel := r.bind(ctx)
	defer cancel()
	for {
		retry, err := r.add(ctx, key, value, opts)
		if !retry {
			return r.wrap("add", key, err)
		}
	}
}

// add makes one attempt. It asks for a retry when the lease it used turned
// out to be gone on the server before the keep-alive noticed; the lease
// has then been marked lost and a fresh one is on its way.
func (r *Repository) add(ctx context.Context, key, value string, opts nameresolve.AddOptions) (retry bool, err error) {
	r.wmu.RLock()
	defer r.wmu.RUnlock()
	var id clientv3.LeaseID
	if opts.TTL > 0 {
		// Taken under wmu so that a re-add cannot run between choosing the
		// lease and recording the record.
		if id, err = r.leaseFor(ctx, opts.TTL); err != nil {
			return false, err
		}
	}
	rev, err := r.put(ctx, key, value, id, opts.Replace)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.leaseLost(opts.TTL, id)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owned == nil {
		// Close has already taken the records over. It waits for writes
		// in flight, so this cannot happen; it guards the map write below.
		return false, nil
	}
	if opts.TTL > 0 || opts.DeleteOnExit {
		r.owned[key] = &ownedRecord{value: value, opts: opts, rev: rev}
	} else {
		delete(r.owned, key) // replaced by a record that outlives us
	}
	return false, nil
}

// put writes key on lease id (0: none) and returns the write's revision.
func (r *Repository) put(ctx context.Context, key, value string, id clientv3.LeaseID, replace bool) (int64, error) {
	var opOpts []clientv3.OpOption
	if id != 0 {
		opOpts = append(opOpts, clientv3.WithLease(id))
	}
	if replace {
		resp, err := r.cli.Put(ctx, key, value, opOpts...)
		if err != nil {
			return 0, err
		}
		return resp.Header.Revision, nil
	}
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, opOpts...)).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, nameresolve.ErrKeyExists
	}
	return resp.Header.Revision, nil
}

// Get implements nameresolve.Repository.
func (r *Repository) Get(ctx context.Context, key string) (string, error) {
	if err := r.checkOpen(); err != nil {
		return "", r.wrap("get", key, err)
	}
	ctx, cancel := r.bind(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return "", r.wrap("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return "", r.wrap("get", key, nameresolve.ErrNotFound)
	}
	return string(resp.Kvs[0].Value), nil
}

// Find implements nameresolve.Repository.
func (r *Repository) Find(ctx context.Context, prefix string) ([]nameresolve.Entry, error) {
	if err := r.checkOpen(); err != nil {
		return nil, r.wrap("find", prefix, err)
	}
	ctx, cancel := r.bind(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, r.wrap("find", prefix, err)
	}
	out := make([]nameresolve.Entry, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = nameresolve.Entry{Key: string(kv.Key), Value: string(kv.Value)}
	}
	return out, nil
}

// Delete implements nameresolve.Repository.
func (r *Repository) Delete(ctx context.Context, key string) error {
	if err := r.checkOpen(); err != nil {
		return r.wrap("delete", key, err)
	}
	ctx, cancel := r.bind(ctx)
	defer cancel()
	r.wmu.RLock()
	defer r.wmu.RUnlock()
	resp, err := r.cli.Delete(ctx, key)
	if err != nil {
		return r.wrap("delete", key, err)
	}
	r.forget(func(k string) bool { return k == key })
	if resp.Deleted == 0 {
		return r.wrap("delete", key, nameresolve.ErrNotFound)
	}
	return nil
}

// ClearSubtree implements nameresolve.Repository. The empty prefix is
// refused: in etcd it would mean every key of every user of the cluster.
func (r *Repository) ClearSubtree(ctx context.Context, prefix string) error {
	if prefix == "" {
		return errEmptyPrefix
	}
	if err := r.checkOpen(); err != nil {
		return r.wrap("clear", prefix, err)
	}
	ctx, cancel := r.bind(ctx)
	defer cancel()
	r.wmu.RLock()
	defer r.wmu.RUnlock()
	if _, err := r.cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		return r.wrap("clear", prefix, err)
	}
	r.forget(func(k string) bool { return strings.HasPrefix(k, prefix) })
	return nil
}

// forget drops owned records matching match: they were deleted, so they must
// be neither re-added nor deleted again on Close.
func (r *Repository) forget(match func(string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.owned {
		if match(k) {
			delete(r.owned, k)
		}
	}
}
