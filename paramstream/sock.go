package paramstream

import (
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// These helpers mirror package stream's socket idioms; they are small
// enough that sharing them through an internal package is not yet worth
// the coupling.

// bindRandomPort binds sock to a free TCP port of host and returns the
// address ("host:port") peers should connect to.
func bindRandomPort(sock *zmq.Socket, host string) (string, error) {
	h := host
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		h = "[" + h + "]"
		if err := sock.SetIpv6(true); err != nil {
			return "", fmt.Errorf("set IPV6: %w", err)
		}
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

// zmqEndpoint turns an address ("host:port", or anything with a scheme,
// used as is) into a ZMQ endpoint.
func zmqEndpoint(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	return "tcp://" + addr
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

// rateLog logs a recurring problem (malformed input) at most once a
// second, with the number of occurrences it left out, so a peer that sends
// garbage in a loop cannot flood the log.
type rateLog struct {
	last       time.Time
	suppressed int64
}

func (r *rateLog) warn(log *slog.Logger, msg string, args ...any) {
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < time.Second {
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
