// Package etcdtest runs an embedded etcd set up as a shared one would be:
// TLS on the client port, client certificates, and role-based
// authentication with a user whose role covers only the distrl/ keys.
// It is for tests of the name-resolve client and of rlctl.
package etcdtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/names"
)

// Users Start creates with Options.Auth.
const (
	User     = "distrl" // role "distrl": read/write on the distrl/ prefix only
	Password = "s3cret distrl"
	Root     = "root"
	RootPass = "root pass"
)

// Options say how the etcd is secured.
type Options struct {
	// TLS serves TLS with the PKI's server certificate.
	TLS bool
	// ClientCertAuth requires a client certificate signed by the PKI's CA (implies TLS).
	ClientCertAuth bool
	// Auth enables authentication with the users above.
	Auth bool
}

// Server is a running etcd with its certificates.
type Server struct {
	*etcdserver.Server
	PKI PKI
}

// Start starts an etcd as opts say in a temporary directory, stopped when
// the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	dir := tb.TempDir()
	pki, err := NewPKI(dir)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	// The cheapest password hashes: under -race on a busy machine etcd's
	// default cost makes each authentication take seconds.
	cfg := etcdserver.Config{Dir: dir + "/data", ClientAddr: "127.0.0.1:0", BcryptCost: uint(bcrypt.MinCost)}
	if opts.TLS || opts.ClientCertAuth {
		cfg.CertFile, cfg.KeyFile = pki.ServerCert, pki.ServerKey
	}
	if opts.ClientCertAuth {
		cfg.TrustedCAFile, cfg.ClientCertAuth = pki.CA, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := etcdserver.Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	s := &Server{Server: srv, PKI: pki}
	if opts.Auth {
		if err := s.enableAuth(ctx, cfg.CertFile != ""); err != nil {
			tb.Fatalf("etcdtest: enable authentication: %v", err)
		}
	}
	return s
}

// enableAuth creates root and User, User's role with read/write on the
// distrl/ prefix, and turns authentication on: etcdctl's
// `user add`, `role add`, `role grant-permission --prefix`, `user grant-role`, `auth enable`.
func (s *Server) enableAuth(ctx context.Context, useTLS bool) error {
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if useTLS {
		info := transport.TLSInfo{TrustedCAFile: s.PKI.CA, CertFile: s.PKI.ClientCert, KeyFile: s.PKI.ClientKey}
		tc, err := info.ClientConfig()
		if err != nil {
			return err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	prefix := names.DefaultRoot + "/"
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, Root, RootPass); return err },
		func() error { _, err := cli.UserGrantRole(ctx, Root, "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, User); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, User, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, User, Password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, User, User); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}
