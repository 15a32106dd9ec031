package nameresolve

import (
	"context"
	"errors"
	"time"
)

// RetryUnavailable calls try until it returns anything but ErrUnavailable,
// until wait has passed, or until ctx ends, and returns try's last error.
// Between tries it sleeps 100 ms, doubling up to 2 s, after calling
// retrying (nil: nothing) with the error and the sleep. It is for work a
// name server that is busy or restarting will do a moment later: a
// worker connecting or registering while hundreds start at once.
func RetryUnavailable(ctx context.Context, wait time.Duration, try func() error, retrying func(err error, in time.Duration)) error {
	deadline := time.Now().Add(wait)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		err := try()
		if !errors.Is(err, ErrUnavailable) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		if retrying != nil {
			retrying(err, backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
