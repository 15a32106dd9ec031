package etcdserver

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func startT(t *testing.T, cfg Config) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, DialTimeout: 3 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestConfigDefaults(t *testing.T) {
	cases := []struct {
		name    string
		in      Config
		wantErr string
		check   func(c Config) bool
	}{
		{"no dir", Config{}, "Dir is required", nil},
		{"bad addr", Config{Dir: "d", ClientAddr: "nonsense"}, "client address", nil},
		{"cert without key", Config{Dir: "d", CertFile: "c.pem"}, "both a certificate and a key", nil},
		{"client certs without CA", Config{Dir: "d", CertFile: "c.pem", KeyFile: "k.pem", ClientCertAuth: true}, "trusted CA", nil},
		{"client certs without TLS", Config{Dir: "d", TrustedCAFile: "ca.pem", ClientCertAuth: true}, "needs TLS", nil},
		{"defaults", Config{Dir: "d"}, "", func(c Config) bool {
			return c.ClientAddr == DefaultClientAddr && c.Name == DefaultName &&
				strings.HasPrefix(c.PeerAddr, "127.0.0.1:") && c.PeerAddr != DefaultPeerAddr
		}},
		{"port 0", Config{Dir: "d", ClientAddr: "127.0.0.1:0"}, "", func(c Config) bool {
			return c.ClientAddr != "127.0.0.1:0" && strings.HasPrefix(c.ClientAddr, "127.0.0.1:")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.withDefaults()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v; want it to mention %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !c.check(got) {
				t.Fatalf("withDefaults = %+v, %v", got, err)
			}
		})
	}
}

// TestRestartKeepsData restarts on the same Dir and ClientAddr and finds the
// data written before; the first Close happens with a client still
// connected, which must not take embed's 5 s request timeout.
func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	s := startT(t, Config{Dir: dir, ClientAddr: "127.0.0.1:0"})
	addr := s.Endpoint()
	cli := client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	// A watch stream that never ends by itself.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	cli.Watch(wctx, "k")

	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close with a connected client took %v", d)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done not closed after Close")
	}

	s2 := startT(t, Config{Dir: dir, ClientAddr: addr})
	if s2.Endpoint() != addr {
		t.Fatalf("Endpoint = %q; want %q", s2.Endpoint(), addr)
	}
	resp, err := client(t, addr).Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get after restart = %v, %v", resp, err)
	}
}

func TestStartCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Start(ctx, Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:0"})
	if err == nil {
		t.Fatal("Start with a canceled context succeeded")
	}
}

// TestTakenClientPort checks that a taken port fails Start with an error that
// still says EADDRINUSE, which is what Start's retry of picked ports keys on.
func TestTakenClientPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Dir: t.TempDir(), ClientAddr: l.Addr().String()})
	if err == nil {
		s.Close()
		t.Fatal("Start on a taken client port succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Start on a taken port = %v; want EADDRINUSE in its chain", err)
	}
}

func TestPicksPorts(t *testing.T) {
	cases := []struct {
		in   Config
		want bool
	}{
		{Config{}, true}, // the default peer address asks for port 0
		{Config{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:2380"}, true},
		{Config{ClientAddr: "127.0.0.1:2379", PeerAddr: "127.0.0.1:2380"}, false},
	}
	for _, c := range cases {
		if got := c.in.picksPorts(); got != c.want {
			t.Errorf("%+v.picksPorts() = %v, want %v", c.in, got, c.want)
		}
	}
}
