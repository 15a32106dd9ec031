package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

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

// configureBound sets the options every bound (receiving) socket shares.
func configureBound(sock *zmq.Socket, host string, maxMsgSize int64) error {
	// LINGER 0: what is still queued for peers that went away must not
	// hold up Close.
	if err := sock.SetLinger(0); err != nil {
		return fmt.Errorf("set LINGER: %w", err)
	}
	// ZMQ drops the connection of a peer whose message exceeds this, before
	// allocating it, so hostile length prefixes cannot balloon memory.
	if err := sock.SetMaxmsgsize(maxMsgSize); err != nil {
		return fmt.Errorf("set MAXMSGSIZE: %w", err)
	}
	if strings.Contains(host, ":") {
		if err := sock.SetIpv6(true); err != nil {
			return fmt.Errorf("set IPV6: %w", err)
		}
	}
	return nil
}

// configureConnecting sets the options every connecting socket shares.
func configureConnecting(sock *zmq.Socket, linger time.Duration) error {
	if err := sock.SetLinger(linger); err != nil {
		return fmt.Errorf("set LINGER: %w", err)
	}
	// IMMEDIATE: queue messages only on completed connections, so nothing
	// waits in a pipe to a peer that is down or not up yet; a send with no
	// live peer fails with EAGAIN and the caller decides what to do.
	if err := sock.SetImmediate(true); err != nil {
		return fmt.Errorf("set IMMEDIATE: %w", err)
	}
	// Registered addresses may be IPv6.
	if err := sock.SetIpv6(true); err != nil {
		return fmt.Errorf("set IPV6: %w", err)
	}
	return nil
}

// bindRandomPort binds sock to a free TCP port of host and returns the
// address ("host:port") peers should connect to.
func bindRandomPort(sock *zmq.Socket, host string) (string, error) {
	h := host
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		h = "[" + h + "]"
	}
	ep := "tcp://" + h + ":0"
	if err := sock.Bind(ep); err != nil {
		return "", fmt.Errorf("bind %s: %w", ep, err)
	}
	last, err := sock.GetLastEndpoint()
	if err != nil {
		return "", fmt.Errorf("bound endpoint of %s: %w", ep, err)
	}
	return strings.TrimPrefix(last, "tcp://"), nil
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

func isEAGAIN(err error) bool {
	return err != nil && zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN)
}

func isHostUnreachable(err error) bool {
	return err != nil && zmq.AsErrno(err) == zmq.Errno(syscall.EHOSTUNREACH)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// rateLog logs a recurring problem (malformed input) at most once per
// interval, with the number of occurrences it left out, so a peer that
// sends garbage in a loop cannot flood the log.
type rateLog struct {
	interval   time.Duration
	last       time.Time
	suppressed int64
}

func (r *rateLog) warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < orDefault(r.interval, time.Second) {
		r.suppressed++
		return
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn(msg, args...)
}
