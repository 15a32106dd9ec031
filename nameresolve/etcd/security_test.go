package etcd_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
)

// secureDial bounds Open in these tests: every failure must come within it.
const secureDial = 2 * time.Second

// TestOpenSecure opens real etcds secured as shared ones are, with good and
// bad settings: good ones read and write records, bad ones fail within the
// dial timeout with the typed error a caller can tell apart.
func TestOpenSecure(t *testing.T) {
	tlsSrv := etcdtest.StartSecure(t, etcdtest.Secure{TLS: true})
	mtlsSrv := etcdtest.StartSecure(t, etcdtest.Secure{ClientCertAuth: true, Auth: true})
	authSrv := etcdtest.StartSecure(t, etcdtest.Secure{Auth: true})
	pki := tlsSrv.PKI
	mpki := mtlsSrv.PKI
	bare := func(ep string) string { return strings.TrimPrefix(ep, "https://") }

	cases := []struct {
		name     string
		endpoint string
		sec      etcd.Security
		want     error  // nil: opens and works
		wantText string // in the error
	}{
		{"tls with CA, https endpoint", tlsSrv.Endpoint(), etcd.Security{CACert: pki.CA}, nil, ""},
		{"tls with CA, bare endpoint", bare(tlsSrv.Endpoint()), etcd.Security{CACert: pki.CA}, nil, ""},
		{"tls skipping verification", tlsSrv.Endpoint(), etcd.Security{InsecureSkipTLSVerify: true}, nil, ""},
		{"tls without CA, https endpoint", tlsSrv.Endpoint(), etcd.Security{}, etcd.ErrTLS, "certificate signed by unknown authority"},
		{"tls without any settings", bare(tlsSrv.Endpoint()), etcd.Security{}, etcd.ErrTLS, "the server speaks TLS"},
		{"tls with another CA", tlsSrv.Endpoint(), etcd.Security{CACert: pki.OtherCA}, etcd.ErrTLS, "unknown authority"},
		{"tls to a plaintext etcd", endpoint, etcd.Security{CACert: pki.CA}, etcd.ErrTLS, "does not speak TLS"},
		{"client cert as the user", mtlsSrv.Endpoint(), etcd.Security{CACert: mpki.CA, Cert: mpki.ClientCert, Key: mpki.ClientKey}, nil, ""},
		{"client cert and password", mtlsSrv.Endpoint(), etcd.Security{CACert: mpki.CA, Cert: mpki.ClientCert, Key: mpki.ClientKey,
			User: etcdtest.User, Password: etcdtest.Password}, nil, ""},
		{"client cert required, none given", mtlsSrv.Endpoint(), etcd.Security{CACert: mpki.CA, User: etcdtest.User, Password: etcdtest.Password},
			etcd.ErrTLS, "certificate required"},
		{"password", authSrv.Endpoint(), etcd.Security{User: etcdtest.User, Password: etcdtest.Password}, nil, ""},
		{"user:password", authSrv.Endpoint(), etcd.Security{User: etcdtest.User + ":" + etcdtest.Password}, nil, ""},
		{"wrong password", authSrv.Endpoint(), etcd.Security{User: etcdtest.User, Password: "wrong"}, etcd.ErrAuth, "authentication failed"},
		{"unknown user", authSrv.Endpoint(), etcd.Security{User: "nobody:x"}, etcd.ErrAuth, "authentication failed"},
		{"no credentials", authSrv.Endpoint(), etcd.Security{}, etcd.ErrAuth, "user name is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			began := time.Now()
			r, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{tc.endpoint}, DialTimeout: secureDial, Security: tc.sec})
			took := time.Since(began)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer r.Close()
				key := "distrl/secure-test/" + strings.ReplaceAll(tc.name, " ", "-")
				if err := r.Add(ctx, key, "v", nameresolve.AddOptions{TTL: 5 * time.Second}); err != nil {
					t.Fatalf("Add: %v", err)
				}
				if v, err := r.Get(ctx, key); err != nil || v != "v" {
					t.Fatalf("Get = %q, %v", v, err)
				}
				return
			}
			if err == nil {
				r.Close()
				t.Fatalf("Open succeeded; want %v", tc.want)
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("Open: %v\nwant %v mentioning %q", err, tc.want, tc.wantText)
			}
			if errors.Is(err, nameresolve.ErrUnavailable) {
				t.Errorf("a refusal also matches ErrUnavailable: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// TestAuthLimitsKeys: a role granted only distrl/ cannot write elsewhere,
// and the refusal is ErrAuth.
func TestAuthLimitsKeys(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.Secure{Auth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: secureDial,
		Security: etcd.Security{User: etcdtest.User, Password: etcdtest.Password}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	err = r.Add(ctx, "elsewhere/k", "v", nameresolve.AddOptions{})
	if !errors.Is(err, etcd.ErrAuth) || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Add outside distrl/ = %v; want ErrAuth (permission denied)", err)
	}
}

// TestSecurityFiles: a setting that cannot be used fails at once, before
// any connection, naming its option and file.
func TestSecurityFiles(t *testing.T) {
	pki, err := etcdtest.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name       string
		sec        etcd.Security
		option     string
		file, text string
	}{
		{"missing CA", etcd.Security{CACert: missing}, "cacert", missing, "no such file"},
		{"CA not PEM", etcd.Security{CACert: garbage}, "cacert", garbage, "no PEM certificate"},
		{"cert without key", etcd.Security{Cert: pki.ClientCert}, "key", "", "needs its key"},
		{"key without cert", etcd.Security{Key: pki.ClientKey}, "cert", "", "needs its certificate"},
		{"missing cert", etcd.Security{Cert: missing, Key: pki.ClientKey}, "cert", missing, "no such file"},
		{"cert not PEM", etcd.Security{Cert: garbage, Key: pki.ClientKey}, "cert", garbage, "no PEM certificate"},
		{"missing key", etcd.Security{Cert: pki.ClientCert, Key: missing}, "key", missing, "no such file"},
		{"key not PEM", etcd.Security{Cert: pki.ClientCert, Key: garbage}, "key", garbage, "PEM"},
		{"key of another cert", etcd.Security{Cert: pki.ClientCert, Key: pki.ServerKey}, "key", pki.ServerKey, "does not match"},
		{"user without password", etcd.Security{User: "distrl"}, "password", "", "no password"},
		{"password twice", etcd.Security{User: "distrl:a", Password: "b"}, "user", "", "not both"},
		{"password without user", etcd.Security{User: ":pw"}, "user", "", "needs a user name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing listens on port 1: an attempt to connect would fail
			// differently (unreachable, not a SecurityError).
			r, err := etcd.Open(context.Background(), etcd.Config{Endpoints: []string{"127.0.0.1:1"}, Security: tc.sec})
			if err == nil {
				r.Close()
				t.Fatal("Open succeeded")
			}
			var se *etcd.SecurityError
			if !errors.As(err, &se) || se.Option != tc.option || se.File != tc.file || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Open: %v (%#v)\nwant a SecurityError for %s, file %q, mentioning %q", err, se, tc.option, tc.file, tc.text)
			}
		})
	}
}

// TestAuthTokenExpires: a repository outlives its authentication token's
// TTL (etcd's --auth-token-ttl): calls after it work (the client
// authenticates again if etcd dropped the token), its leased record stays,
// and a watch opened before goes on.
func TestAuthTokenExpires(t *testing.T) {
	srv := etcdtest.StartSecure(t, etcdtest.Secure{Auth: true, AuthTokenTTL: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: secureDial,
		Security: etcd.Security{User: etcdtest.User, Password: etcdtest.Password}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	const prefix = "distrl/token-test/"
	events, err := r.Watch(ctx, prefix)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if err := r.Add(ctx, prefix+"leased", "v", nameresolve.AddOptions{TTL: 2 * time.Second}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	time.Sleep(4 * time.Second) // past the token's TTL, and twice the lease's
	if v, err := r.Get(ctx, prefix+"leased"); err != nil || v != "v" {
		t.Fatalf("Get after the token expired = %q, %v", v, err)
	}
	if err := r.Add(ctx, prefix+"later", "w", nameresolve.AddOptions{}); err != nil {
		t.Fatalf("Add after the token expired: %v", err)
	}
	for {
		select {
		case ev := <-events:
			if ev.Key == prefix+"later" {
				return
			}
		case <-ctx.Done():
			t.Fatal("the watch saw nothing after the token expired")
		}
	}
}
