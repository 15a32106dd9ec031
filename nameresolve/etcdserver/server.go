package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"

	// Imported for its effect: gRPC must print nothing to stderr.
	_ "github.com/distrl/distrl/nameresolve/internal/grpcquiet"
)

// Raft timing for a single member on one machine. etcd's defaults (100 ms
// ticks, 1 s election) only matter across a network; with these a fresh
// member elects itself and is ready in tens of milliseconds.
const (
	tickMs     = 10
	electionMs = 100
)

// closeGrace is how long Close lets clients' in-flight calls finish before
// cutting their connections. Watch and lease keep-alive streams never finish
// on their own, and without the cut embed.Etcd.Close would wait its full
// request timeout (over 5 s) for them.
const closeGrace = 500 * time.Millisecond

// Server is a running embedded etcd.
type Server struct {
	etcd     *embed.Etcd
	endpoint string
	log      *slog.Logger

	mu    sync.Mutex
	grpcs []*grpc.Server // client-facing gRPC servers, captured to cut streams on Close

	closeOnce sync.Once
}

// portAttempts bounds how often Start picks new ports when an address it was
// given with port 0 is taken between picking and binding (freePort's window).
const portAttempts = 5

// Start starts an embedded etcd and waits, bounded by ctx, until it serves clients.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	for attempt := 1; ; attempt++ {
		resolved, err := cfg.withDefaults()
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, resolved)
		if err == nil || attempt == portAttempts || !errors.Is(err, syscall.EADDRINUSE) || !cfg.picksPorts() {
			return s, err
		}
		resolved.Logger.Info("embedded etcd: a picked port was taken meanwhile; picking again", "err", err)
	}
}

// start starts etcd on the concrete addresses of cfg.
func start(ctx context.Context, cfg Config) (*Server, error) {
	clientURL := url.URL{Scheme: "http", Host: cfg.ClientAddr}
	peerURL := url.URL{Scheme: "http", Host: cfg.PeerAddr}
	endpoint := cfg.ClientAddr
	if cfg.tls() {
		clientURL.Scheme = "https"
		endpoint = clientURL.String()
	}

	s := &Server{endpoint: endpoint, log: cfg.Logger}

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClientTLSInfo = transport.TLSInfo{
		CertFile: cfg.CertFile, KeyFile: cfg.KeyFile,
		TrustedCAFile: cfg.TrustedCAFile, ClientCertAuth: cfg.ClientCertAuth,
	}
	if cfg.BcryptCost > 0 {
		ec.BcryptCost = cfg.BcryptCost
	}
	if cfg.AuthTokenTTL > 0 {
		ec.AuthTokenTTL = uint(max(cfg.AuthTokenTTL.Round(time.Second), time.Second) / time.Second)
	}
	ec.UnsafeNoFsync = cfg.NoFsync
	ec.TickMs = tickMs
	ec.ElectionMs = electionMs
	// Keep one hour of history: enough for any watcher to catch up after a
	// hiccup, while a long run that keeps rewriting records stays bounded.
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1h"
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger))
	ec.ServiceRegister = s.registerGRPC

	start := time.Now()
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start etcd in %s on %s: %w", cfg.Dir, cfg.ClientAddr, err)
	}
	s.etcd = e

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdserver: etcd in %s failed while starting: %w", cfg.Dir, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcdserver: etcd in %s not ready: %w", cfg.Dir, ctx.Err())
	}
	s.log.Info("embedded etcd ready", "endpoint", s.endpoint, "dir", cfg.Dir,
		"took", time.Since(start).Round(time.Millisecond))
	return s, nil
}

// registerGRPC is embed.Config.ServiceRegister: it is the only way to reach
// the gRPC servers embed creates, which Close needs.
func (s *Server) registerGRPC(gs *grpc.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grpcs = append(s.grpcs, gs)
}

// Endpoint is the client address for nameresolve/etcd.Open: "HOST:PORT",
// or "https://HOST:PORT" when it serves TLS.
func (s *Server) Endpoint() string { return s.endpoint }

// Done is closed once the server has stopped, whether by Close or by a fatal error.
func (s *Server) Done() <-chan struct{} { return s.etcd.Server.StopNotify() }

// Close stops the server. It is idempotent.
//
// Close clients first. Clients still connected have their calls cut after a
// short grace period (closeGrace) and see the server as unavailable, exactly
// as if it had crashed; their leases keep running down on disk and are
// renewed for a full TTL when the server next starts. Left to itself,
// embed.Etcd.Close would wait about 5 s for their watch and keep-alive
// streams instead of the grace period.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		start := time.Now()
		s.stopGRPC()
		s.etcd.Close()
		s.log.Info("embedded etcd stopped", "endpoint", s.endpoint,
			"took", time.Since(start).Round(time.Millisecond))
	})
	return nil
}

// stopGRPC stops every client-facing gRPC server gracefully, cutting what is
// left after closeGrace.
func (s *Server) stopGRPC() {
	s.mu.Lock()
	grpcs := s.grpcs
	s.mu.Unlock()

	var wg sync.WaitGroup
	for _, gs := range grpcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go func() {
				gs.GracefulStop()
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(closeGrace):
				gs.Stop() // also makes the GracefulStop above return
				<-done
			}
		}()
	}
	wg.Wait()
}
