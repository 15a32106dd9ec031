package endpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Defaults of the bound side of the data-plane streams.
const (
	DefaultHost       = "127.0.0.1"
	DefaultTTL        = 10 * time.Second
	DefaultMaxMsgSize = 64 << 20
	// unregisterTimeout bounds how long Close waits for name resolve.
	unregisterTimeout = 3 * time.Second
)

// Bind creates a socket of type t with o (zsock.Bind; LINGER 0,
// so what is still queued for peers that went away does not hold up
// Close), bound to a free port of host and to an ipc:// path
// (zsock.BindIPC), and registers both under key (zsock.Advertise), with
// the shared-memory listener directory shm if not "", on a lease of ttl;
// it returns the tcp address. On error nothing is left open or registered.
func Bind(ctx context.Context, t zmq.Type, o zsock.Options, host string,
	repo nameresolve.Repository, key string, ttl time.Duration, shm string) (*zmq.Socket, string, error) {
	o.Linger = 0
	sock, addr, err := zsock.Bind(t, host, o)
	if err != nil {
		return nil, "", err
	}
	// Peers on this node connect over ipc://, the others over tcp.
	ipc, err := zsock.BindIPC(sock)
	if err != nil {
		sock.Close()
		return nil, "", err
	}
	if err := register(ctx, repo, key, zsock.Advertise(addr, ipc, shm), ttl); err != nil {
		sock.Close()
		return nil, "", err
	}
	return sock, addr, nil
}

// ConnectingOptions are the options every connecting socket shares:
// IMMEDIATE, so a send with no live peer fails with EAGAIN and the caller
// decides what to do, and IPV6, as registered addresses may be IPv6;
// CURVE as a client with the trial's keys, if any.
func ConnectingOptions(linger time.Duration, curve *rpc.CurveKeyPair) zsock.Options {
	return zsock.Options{Linger: linger, Immediate: true, IPv6: true, Curve: curve.SocketKeys()}
}

// register publishes addr under key on a lease of ttl that the repository
// keeps alive, so the record vanishes within ttl if the process dies.
func register(ctx context.Context, repo nameresolve.Repository, key, addr string, ttl time.Duration) error {
	err := repo.Add(ctx, key, addr, nameresolve.AddOptions{TTL: ttl, DeleteOnExit: true})
	if err != nil {
		return fmt.Errorf("register %s at %q: %w", addr, key, err)
	}
	return nil
}

// Close removes a bound socket's endpoint record, so peers stop
// sending to it at once, and closes the socket; what names the socket in
// the error.
func Close(repo nameresolve.Repository, key string, sock *zmq.Socket, what string) error {
	if err := errors.Join(unregister(repo, key), sock.Close()); err != nil {
		return fmt.Errorf("close %s: %w", what, err)
	}
	return nil
}

// unregister removes a record on a graceful Close, so peers stop using
// the endpoint at once instead of after the lease expires.
func unregister(repo nameresolve.Repository, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), unregisterTimeout)
	defer cancel()
	err := repo.Delete(ctx, key)
	if err == nil || errors.Is(err, nameresolve.ErrNotFound) || errors.Is(err, nameresolve.ErrClosed) {
		// Gone already, or the repository closed, which removed it too.
		return nil
	}
	return fmt.Errorf("unregister %q: %w", key, err)
}

// Prepare is the part of opening a bound endpoint that every one shares:
// host and ttl get the defaults where zero, and so does maxMsgSize where
// the endpoint has one (nil: none); repo must be set and no value
// negative. what names the options in the error ("stream:
// InferenceServerOptions"); the endpoint checks its own fields after.
func Prepare(what string, repo nameresolve.Repository, host *string, ttl *time.Duration, maxMsgSize *int64) error {
	*host = cmp.Or(*host, DefaultHost)
	*ttl = cmp.Or(*ttl, DefaultTTL)
	if maxMsgSize != nil {
		*maxMsgSize = cmp.Or(*maxMsgSize, DefaultMaxMsgSize)
	}
	switch {
	case repo == nil:
		return fmt.Errorf("%s.Repo is required", what)
	case *ttl < 0:
		return fmt.Errorf("%s.TTL %v is negative", what, *ttl)
	case maxMsgSize != nil && *maxMsgSize < 0:
		return fmt.Errorf("%s.MaxMsgSize %d is negative", what, *maxMsgSize)
	}
	return nil
}
