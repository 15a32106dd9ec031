package etcd_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
)

// endpoint is the embedded etcd shared by every test in the binary.
var endpoint string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "nameresolve-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Dir: dir, ClientAddr: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Close()
	endpoint = srv.Endpoint()
	return m.Run()
}

// open opens a repository on endpoint (the shared server unless given),
// closed when the test ends.
func open(tb testing.TB, endpoints ...string) *etcd.Repository {
	tb.Helper()
	if len(endpoints) == 0 {
		endpoints = []string{endpoint}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := etcd.Open(ctx, etcd.Config{Endpoints: endpoints})
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	return r
}

// restartableEtcd is an etcd of a test's own, which the test stops and
// starts again on the same data directory and port.
type restartableEtcd struct {
	t         *testing.T
	dir, addr string
	srv       *etcdserver.Server
}

// startRestartable starts an etcd in a fresh directory on a free port.
func startRestartable(ctx context.Context, t *testing.T) *restartableEtcd {
	t.Helper()
	e := &restartableEtcd{t: t, dir: t.TempDir(), addr: "127.0.0.1:0"}
	e.restart(ctx)
	e.addr = e.srv.Endpoint()
	return e
}

// restart starts the etcd (again) on its directory and port.
func (e *restartableEtcd) restart(ctx context.Context) {
	e.t.Helper()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Dir: e.dir, ClientAddr: e.addr})
	if err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
}

// stop stops the etcd.
func (e *restartableEtcd) stop() { _ = e.srv.Close() }
