package etcd

import (
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	// Imported for its effect: gRPC must print nothing to stderr.
	_ "github.com/distrl/distrl/nameresolve/internal/grpcquiet"
)

// DefaultDialTimeout bounds Open's check that etcd answers.
const DefaultDialTimeout = 3 * time.Second

// Timeouts for work the Repository does on its own, outside any caller's context.
const (
	// closeTimeout bounds all of Close's deletes and revokes together, so
	// Close returns promptly when etcd is gone.
	closeTimeout = 2 * time.Second
	// bgTimeout bounds one background call (lease grant, one re-add).
	bgTimeout = 5 * time.Second
	// Retry backoff for lease re-grants and broken watches.
	minBackoff = 50 * time.Millisecond
	maxBackoff = time.Second
	// gRPC keep-alive pings find a dead server behind a half-open
	// connection. etcd rejects pings more often than every 5 s.
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 3 * time.Second
)

// reconnectParams replace gRPC's reconnect backoff, which grows to two
// minutes: after a long etcd outage every worker would take up to that long
// to notice etcd is back. A name server on the local network is cheap to
// knock on every second.
var reconnectParams = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: 2 * time.Second,
}

// Config says which etcd to use.
type Config struct {
	// Endpoints are the etcd client addresses, "host:port" or URLs. Required.
	Endpoints []string
	// DialTimeout bounds Open's check that etcd answers; DefaultDialTimeout if zero.
	DialTimeout time.Duration
	// Logger receives lease losses and recoveries; nil discards them.
	Logger *slog.Logger
	// Security is TLS and authentication; the zero value is neither.
	Security
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Endpoints) == 0 {
		return c, errors.New("nameresolve/etcd: Config.Endpoints is empty")
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
