package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	zmq "github.com/pebbe/zmq4"
)

// Defaults shared by the bound side of both streams.
const (
	DefaultHost       = "127.0.0.1"
	DefaultTTL        = 10 * time.Second
	DefaultMaxMsgSize = 64 << 20
	// unregisterTimeout bounds how long Close waits for name resolve.
	unregisterTimeout = 3 * time.Second
)

// bindAndRegister sets the options every bound (receiving) socket shares,
// on top of o, binds sock to a free port of host and registers the address
// under key on a lease of ttl. It returns the address.
func bindAndRegister(ctx context.Context, sock *zmq.Socket, o zsock.Options, host string,
	repo nameresolve.Repository, key string, ttl time.Duration) (string, error) {
	// LINGER 0: what is still queued for peers that went away must not
	// hold up Close.
	o.Linger = 0
	o.IPv6 = strings.Contains(host, ":")
	if err := zsock.Configure(sock, o); err != nil {
		return "", err
	}
	addr, err := zsock.BindRandomPort(sock, host)
	if err != nil {
		return "", err
	}
	return addr, register(ctx, repo, key, addr, ttl)
}

// connectingOptions are the options every connecting socket shares:
// IMMEDIATE, so a send with no live peer fails with EAGAIN and the caller
// decides what to do, and IPV6, as registered addresses may be IPv6.
func connectingOptions(linger time.Duration) zsock.Options {
	return zsock.Options{Linger: linger, Immediate: true, IPv6: true}
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
