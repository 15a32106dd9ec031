package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
)

// Repository is a nameresolve.Repository on etcd. It is safe for concurrent use.
type Repository struct {
	cli       *clientv3.Client
	endpoints string // for error messages
	log       *slog.Logger

	ctx    context.Context // canceled by Close: aborts calls, keep-alives and watches
	cancel context.CancelFunc
	wg     sync.WaitGroup // keep-alive and watch goroutines

	// wmu orders this repository's writes against re-adding records after a
	// lease loss: writes hold it shared, the re-add exclusively, so a record
	// deleted or replaced here is never resurrected by a stale re-add.
	wmu sync.RWMutex

	mu     sync.Mutex
	closed bool
	lessor clientv3.Lease           // replaced if its keep-alive loop halts
	leases map[time.Duration]*lease // one per distinct TTL, granted lazily
	owned  map[string]*ownedRecord  // records to re-add or delete on exit
}

// ownedRecord is a record this repository wrote with a TTL or DeleteOnExit.
type ownedRecord struct {
	value string
	opts  nameresolve.AddOptions
	// rev is the revision of our last write. While the key's ModRevision
	// still equals it, nobody else has written the key and it is ours.
	rev int64
}

var _ nameresolve.Repository = (*Repository)(nil)

// Open connects to etcd and checks, within cfg.DialTimeout, that it answers.
// A Security field that cannot be used is a *SecurityError, before any
// connection. If etcd does not answer, the error wraps
// nameresolve.ErrUnavailable and reads "name resolve: etcd at HOST:PORT is
// unreachable (REASON)"; a failed TLS handshake wraps ErrTLS, refused
// credentials ErrAuth, each on one line with the reason.
func Open(ctx context.Context, cfg Config) (*Repository, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	user, password, err := cfg.Credentials()
	if err != nil {
		return nil, err
	}
	// With a user, New authenticates, bounded by DialTimeout.
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{grpc.WithConnectParams(reconnectParams)},
		TLS:                  tc,
		Username:             user,
		Password:             password,
	})
	if err != nil {
		return nil, newOpenError(cfg.Endpoints, cfg.DialTimeout, tc, err)
	}
	// A linearizable read needs a leader, so success means etcd can serve
	// us. The key is under distrl's root, where a shared etcd's role for
	// distrl grants access.
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err = cli.Get(pctx, names.DefaultRoot+"/open-probe", clientv3.WithCountOnly())
	cancel()
	if err != nil {
		_ = cli.Close()
		if errors.Is(ctx.Err(), context.Canceled) { // the caller gave up; etcd may be fine
			return nil, fmt.Errorf("nameresolve/etcd: open %s: %w", strings.Join(cfg.Endpoints, ","), ctx.Err())
		}
		return nil, newOpenError(cfg.Endpoints, cfg.DialTimeout, tc, err)
	}

	r := &Repository{
		cli:       cli,
		endpoints: strings.Join(cfg.Endpoints, ","),
		log:       cfg.Logger,
		lessor:    clientv3.NewLease(cli),
		leases:    make(map[time.Duration]*lease),
		owned:     make(map[string]*ownedRecord),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// bind returns ctx, also canceled when the repository closes, so that no
// call outlives Close.
func (r *Repository) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// addGoroutine counts a goroutine (a watch's, a mirror's) that Close must
// wait for, or returns ErrClosed after Close.
func (r *Repository) addGoroutine() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nameresolve.ErrClosed
	}
	r.wg.Add(1) // under mu, after the closed check: Close cannot be waiting yet
	return nil
}

// checkOpen returns ErrClosed after Close.
func (r *Repository) checkOpen() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nameresolve.ErrClosed
	}
	return nil
}

// Close deletes this repository's DeleteOnExit records and revokes its
// leases, so that its leased records vanish at once, then stops keep-alives
// and watches and closes the client. Deletes and revokes share a bounded
// timeout, so Close returns promptly even if etcd is gone; the leased
// records then expire by TTL. Close is idempotent.
func (r *Repository) Close() error {
	if !r.shutdown() {
		return nil
	}
	// No write of ours is in flight after this: Close canceled them, and
	// writes check closed first.
	r.wmu.Lock()
	defer r.wmu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	r.mu.Lock()
	owned := r.owned
	r.owned = nil
	var ids []clientv3.LeaseID
	for _, l := range r.leases {
		if l.id != 0 {
			ids = append(ids, l.id)
		}
	}
	lessor := r.lessor
	r.mu.Unlock()

	for key, o := range owned {
		if !o.opts.DeleteOnExit {
			continue
		}
		// Only if still ours: a newer incarnation may have replaced it.
		_, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", o.rev)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %q on exit: %w", key, err))
		}
	}
	for _, id := range ids {
		if _, err := lessor.Revoke(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("revoke lease %x: %w", int64(id), err))
		}
	}
	_ = lessor.Close()
	if err := r.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		errs = append(errs, fmt.Errorf("close client: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("nameresolve/etcd: close: %w", joinErrors(errs))
	}
	return nil
}

// shutdown marks the repository closed, cancels everything in flight and
// waits for its goroutines. It reports false if it was already closed.
func (r *Repository) shutdown() bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return true
}

// abandon closes the client without deleting or revoking anything, leaving
// etcd as a crashed process would. Tests use it through export_test.go.
func (r *Repository) abandon() error {
	if !r.shutdown() {
		return nil
	}
	r.mu.Lock()
	lessor := r.lessor
	r.mu.Unlock()
	_ = lessor.Close()
	if err := r.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
