package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/distrl/distrl/nameresolve"
)

var (
	errEmptyKey    = errors.New("nameresolve/etcd: empty key")
	errEmptyPrefix = errors.New("nameresolve/etcd: refusing to clear the empty prefix (every record)")
)

// ErrAuth says etcd refused this client's credentials: a wrong user or
// password, none where etcd requires them, or a role without permission on
// the key.
var ErrAuth = errors.New("nameresolve/etcd: authentication failed")

// ErrTLS says the TLS handshake with etcd failed: an untrusted server
// certificate, a client certificate missing or refused, or one side
// speaking TLS and the other not.
var ErrTLS = errors.New("nameresolve/etcd: TLS handshake failed")

// openError is Open's one-line answer when etcd cannot be used. It matches
// kind (nameresolve.ErrUnavailable, ErrTLS or ErrAuth) and the underlying
// cause.
type openError struct {
	endpoints string
	what      string // what went wrong, after "etcd at HOST:PORT"
	reason    string
	kind      error
	cause     error
}

func (e *openError) Error() string {
	return fmt.Sprintf("name resolve: etcd at %s %s (%s)", e.endpoints, e.what, e.reason)
}

func (e *openError) Unwrap() []error { return []error{e.kind, e.cause} }

// newOpenError explains why Open failed. gRPC mostly says only "deadline
// exceeded", so a plain TCP dial, then a TLS handshake, finds the more
// useful reason ("connection refused", "certificate signed by unknown
// authority") when there is one.
func newOpenError(endpoints []string, timeout time.Duration, tc *tls.Config, cause error) error {
	e := &openError{endpoints: strings.Join(endpoints, ","), cause: cause}
	if isAuthError(cause) {
		e.what, e.reason, e.kind = "refused the credentials: authentication failed", oneLine(cause.Error()), ErrAuth
		return e
	}
	e.what, e.reason, e.kind = "is unreachable", fmt.Sprintf("no answer within %v", timeout), nameresolve.ErrUnavailable
	for _, ep := range endpoints {
		addr, wantTLS := endpointAddr(ep, tc != nil)
		if err := tcpDial(addr, timeout); err != nil {
			e.reason = oneLine(err.Error())
			return e
		}
		// The server answered TCP: give its handshake longer than the dial
		// timeout, which a loaded server can spend on the handshake's
		// signatures alone, so that the reason is the server's answer and
		// not a timeout.
		if reason := tlsMismatch(addr, wantTLS, tc, max(timeout, minTLSProbe)); reason != "" {
			e.what, e.reason, e.kind = "failed the TLS handshake", reason, ErrTLS
			return e
		}
	}
	return e
}

// endpointAddr is ep's host:port and whether the client speaks TLS to it,
// as the etcd client decides: https always, http never, no scheme when the
// client has a TLS configuration.
func endpointAddr(ep string, haveTLS bool) (string, bool) {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host, u.Scheme == "https" || (u.Scheme != "http" && haveTLS)
	}
	return ep, haveTLS
}

func tcpDial(addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// minTLSProbe is the least time the diagnosis gives a TLS handshake.
const minTLSProbe = 10 * time.Second

// tlsMismatch shakes hands with addr as the client would and says what
// went wrong; "" if nothing did. A client without TLS checks whether the
// server speaks TLS, which a plaintext client cannot talk to.
func tlsMismatch(addr string, wantTLS bool, tc *tls.Config, timeout time.Duration) string {
	if !wantTLS {
		tc = &tls.Config{InsecureSkipVerify: true} // only asks whether the server speaks TLS
	} else if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12} // https:// without settings: the system's roots
	}
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"} // as gRPC does; servers may insist
	if host, _, err := net.SplitHostPort(addr); err == nil && tc.ServerName == "" {
		tc.ServerName = host
	}
	err := tlsHandshake(addr, tc, timeout)
	var rh tls.RecordHeaderError
	switch {
	case !wantTLS && err == nil:
		return "the server speaks TLS and this client was given no TLS settings: give a CA certificate, or an https:// endpoint"
	case wantTLS && (errors.Is(err, io.EOF) || errors.As(err, &rh)):
		return "the server does not speak TLS: " + oneLine(err.Error())
	case wantTLS && err != nil:
		return oneLine(err.Error())
	}
	return ""
}

// tlsHandshake connects and completes a TLS handshake. With TLS 1.3 the
// server judges the client's certificate only after the client has
// finished, so a short read catches its refusal too.
func tlsHandshake(addr string, tc *tls.Config, timeout time.Duration) error {
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", addr, tc)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(min(timeout, 300*time.Millisecond)))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) && !(errors.As(err, &ne) && ne.Timeout()) {
		return err
	}
	return nil
}

// isAuthError reports whether etcd refused the client's credentials or
// their permissions.
func isAuthError(err error) bool {
	for _, e := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied,
		rpctypes.ErrInvalidAuthToken, rpctypes.ErrUserNotFound, rpctypes.ErrAuthOldRevision} {
		if errors.Is(err, e) {
			return true
		}
	}
	c := status.Code(err)
	return c == codes.PermissionDenied || c == codes.Unauthenticated
}

// oneLine keeps multi-line gRPC errors from breaking a log line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// isUnavailable reports whether err says etcd cannot serve right now, as
// opposed to a refusal or the caller's own cancellation.
func isUnavailable(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// wrap gives err the operation's context and the nameresolve sentinel a
// caller can test with errors.Is: ErrClosed once the repository is closed
// (in-flight calls are canceled by Close), ErrUnavailable for transport
// failures, including a caller's deadline that ran out while the connection
// was down.
func (r *Repository) wrap(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nameresolve.ErrNotFound), errors.Is(err, nameresolve.ErrKeyExists),
		errors.Is(err, nameresolve.ErrClosed):
		return fmt.Errorf("%s %q: %w", op, key, err)
	case r.ctx.Err() != nil:
		return fmt.Errorf("%s %q: %w", op, key, nameresolve.ErrClosed)
	case isAuthError(err):
		return fmt.Errorf("%s %q: %w (etcd at %s: %w)", op, key, ErrAuth, r.endpoints, err)
	case isUnavailable(err) || (errors.Is(err, context.DeadlineExceeded) && r.connDown()):
		return fmt.Errorf("%s %q: %w (etcd at %s: %w)", op, key, nameresolve.ErrUnavailable, r.endpoints, err)
	}
	return fmt.Errorf("%s %q: etcd at %s: %w", op, key, r.endpoints, err)
}

// connDown reports whether the client has no working connection to etcd.
func (r *Repository) connDown() bool {
	conn := r.cli.ActiveConnection()
	if conn == nil {
		return true
	}
	s := conn.GetState()
	return s == connectivity.TransientFailure || s == connectivity.Connecting
}

// joinedErrors is errors.Join on one line, for Close's list of failures.
type joinedErrors []error

func joinErrors(errs []error) error { return joinedErrors(errs) }

func (e joinedErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e joinedErrors) Unwrap() []error { return e }
