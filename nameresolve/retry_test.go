package nameresolve

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRetryUnavailable(t *testing.T) {
	other := errors.New("refused")
	tests := []struct {
		name      string
		results   []error // what each try returns; the last repeats
		wait      time.Duration
		wantErr   error
		wantTries int
	}{
		{"succeeds at once", []error{nil}, time.Minute, nil, 1},
		{"other error is final", []error{other}, time.Minute, other, 1},
		{"unavailable, then succeeds", []error{ErrUnavailable, ErrUnavailable, nil}, time.Minute, nil, 3},
		{"no wait: one try", []error{ErrUnavailable}, 0, ErrUnavailable, 1},
		{"gives up after wait", []error{ErrUnavailable}, 250 * time.Millisecond, ErrUnavailable, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tries, retried := 0, 0
			err := RetryUnavailable(context.Background(), tt.wait, func() error {
				tries++
				return tt.results[min(tries, len(tt.results))-1]
			}, func(error, time.Duration) { retried++ })
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || tries != tt.wantTries || retried != tries-1 {
				t.Fatalf("err %v after %d tries (%d retried); want %v after %d", err, tries, retried, tt.wantErr, tt.wantTries)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := RetryUnavailable(ctx, time.Minute, func() error { return ErrUnavailable }, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after ctx ended: %v", err)
	}
}
