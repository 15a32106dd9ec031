package etcdtest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/names"
)

// Users StartSecure creates with Secure.Auth.
const (
	User     = "distrl" // role "distrl": read/write on the distrl/ prefix only
	Password = "s3cret distrl"
	Root     = "root"
	RootPass = "root pass"
)

// Secure says how StartSecure secures its etcd.
type Secure struct {
	// TLS serves TLS with the PKI's server certificate.
	TLS bool
	// ClientCertAuth requires a client certificate signed by the PKI's CA (implies TLS).
	ClientCertAuth bool
	// Auth enables authentication with the users above.
	Auth bool
	// Host is the address to listen on (port picked); 127.0.0.1 if empty.
	// The server certificate covers it.
	Host string
	// AuthTokenTTL is etcd's --auth-token-ttl; its default if zero.
	AuthTokenTTL time.Duration
}

// SecureServer is a running etcd of its own with its certificates.
type SecureServer struct {
	*etcdserver.Server
	PKI PKI
}

// StartSecure starts an etcd of the test's own, secured as a shared one
// would be: TLS on the client port, client certificates, and role-based
// authentication with a user whose role covers only the distrl/ keys, as
// opts say. It runs in a temporary directory and stops when the test ends.
func StartSecure(tb testing.TB, opts Secure) *SecureServer {
	tb.Helper()
	dir := tb.TempDir()
	host := cmp.Or(opts.Host, "127.0.0.1")
	pki, err := NewPKI(dir, host)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	// The cheapest password hashes: under -race on a busy machine etcd's
	// default cost makes each authentication take seconds.
	cfg := etcdserver.Config{Dir: dir + "/data", ClientAddr: net.JoinHostPort(host, "0"), BcryptCost: uint(bcrypt.MinCost),
		AuthTokenTTL: opts.AuthTokenTTL}
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
	s := &SecureServer{Server: srv, PKI: pki}
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
func (s *SecureServer) enableAuth(ctx context.Context, useTLS bool) error {
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
