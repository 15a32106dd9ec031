package etcd

import (
	"context"
	"errors"
	"fmt"
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

// unreachableError is Open's one-line answer when etcd does not answer.
// It matches nameresolve.ErrUnavailable and the underlying cause.
type unreachableError struct {
	endpoints string
	reason    string
	cause     error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("name resolve: etcd at %s is unreachable (%s)", e.endpoints, e.reason)
}

func (e *unreachableError) Unwrap() []error { return []error{nameresolve.ErrUnavailable, e.cause} }

// newUnreachable explains why the probe failed. gRPC only says "deadline
// exceeded", so a plain TCP dial finds the more useful reason
// ("connection refused") when there is one.
func newUnreachable(endpoints []string, timeout time.Duration, cause error, dial func(string) error) error {
	reason := fmt.Sprintf("no answer within %v", timeout)
	for _, ep := range endpoints {
		if err := dial(ep); err != nil {
			reason = oneLine(err.Error())
			break
		}
	}
	return &unreachableError{endpoints: strings.Join(endpoints, ","), reason: reason, cause: cause}
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
