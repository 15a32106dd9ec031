package etcdtest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
)

var (
	once sync.Once
	srv  *etcdserver.Server
	dir  string
	err  error
)

// Endpoint starts the shared embedded etcd if it is not running yet and
// returns its client endpoint ("127.0.0.1:PORT").
func Endpoint(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "distrl-etcd-test-"); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srv, err = etcdserver.Start(ctx, etcdserver.Config{Dir: dir, ClientAddr: "127.0.0.1:0"})
	})
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	return srv.Endpoint()
}

// Repo is a repository on the shared etcd, closed when the test ends.
func Repo(t testing.TB) nameresolve.Repository {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{Endpoint(t)}})
	if err != nil {
		t.Fatalf("open etcd: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Stop stops the shared etcd, if a test started it; TestMain calls it after m.Run.
func Stop() {
	if srv != nil {
		srv.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
}
