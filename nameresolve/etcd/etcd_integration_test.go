package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/etcdserver"
	"github.com/distrl/distrl/nameresolve/nrtest"
)

func TestConformance(t *testing.T) {
	nrtest.RunConformance(t, func(t *testing.T) nameresolve.Repository { return open(t) })
}

// rawClient is a plain etcd client for looking behind the repository's back.
func rawClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// leaseOf returns the lease key is attached to, or -1 if the key is missing.
// Errors (etcd restarting) count as "don't know yet" and return -2.
func leaseOf(cli *clientv3.Client, key string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	switch {
	case err != nil:
		return -2
	case len(resp.Kvs) == 0:
		return -1
	}
	return resp.Kvs[0].Lease
}

// TestTTLExpiresAfterCrash: a process that dies without Close loses its
// leased records within the TTL, while its plain records stay.
func TestTTLExpiresAfterCrash(t *testing.T) {
	ctx := context.Background()
	key := fmt.Sprintf("test/crash/%d/", time.Now().UnixNano())
	r := open(t)
	if err := r.Add(ctx, key+"leased", "v", nameresolve.AddOptions{TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(ctx, key+"plain", "v", nameresolve.AddOptions{DeleteOnExit: true}); err != nil {
		t.Fatal(err)
	}
	// Outlive the TTL once: the keep-alive must be holding the lease.
	time.Sleep(1500 * time.Millisecond)
	other := open(t)
	if _, err := other.Get(ctx, key+"leased"); err != nil {
		t.Fatalf("leased record gone while its owner is alive: %v", err)
	}
	if err := r.CloseWithoutCleanup(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually.True(t, 4*time.Second, "the leased record gone after its owner died", func() bool {
		_, err := other.Get(ctx, key+"leased")
		return errors.Is(err, nameresolve.ErrNotFound)
	})
	t.Logf("leased record expired %v after the crash (TTL 1s)", time.Since(start).Round(10*time.Millisecond))
	// DeleteOnExit needs a graceful exit: a crash leaves it.
	if _, err := other.Get(ctx, key+"plain"); err != nil {
		t.Fatalf("DeleteOnExit record after a crash: %v", err)
	}
	_ = other.Delete(ctx, key+"plain")
}

// TestSurvivesEtcdRestart: etcd goes down for longer than the TTL and comes
// back on the same data dir and port; the repository grants a new lease and
// its record stays without the caller doing anything.
func TestSurvivesEtcdRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := startRestartable(ctx, t)
	addr := e.addr
	r := open(t, addr)
	const key = "test/restart/worker"
	if err := r.Add(ctx, key, "127.0.0.1:1234", nameresolve.AddOptions{TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	// A watch opened before the outage goes on delivering after it.
	events, err := r.Watch(ctx, "test/restart/")
	if err != nil {
		t.Fatal(err)
	}
	cli := rawClient(t, addr)
	oldLease := leaseOf(cli, key)
	if oldLease <= 0 {
		t.Fatalf("record not on a lease before the restart: %d", oldLease)
	}

	e.stop()
	// Down for longer than the TTL: the client gives the lease up.
	time.Sleep(2500 * time.Millisecond)
	e.restart(ctx)
	defer e.stop()
	defer r.Close() // before the server, or its Close waits on our streams

	// A fresh client: the first one is still in gRPC's reconnect backoff.
	cli = rawClient(t, addr)
	start := time.Now()
	// etcd restores the old lease with a fresh TTL; nobody renews it, so it
	// would lapse within the TTL. The record must move to a new lease.
	eventually.NoError(t, 5*time.Second, "the record re-added on a new lease", func() error {
		if l := leaseOf(cli, key); l <= 0 || l == oldLease {
			return fmt.Errorf("lease %d, old %d", l, oldLease)
		}
		return nil
	})
	t.Logf("record on a new lease %v after the restart", time.Since(start).Round(10*time.Millisecond))
	// The re-add is a put like any other, and the watch sees it.
	select {
	case ev := <-events:
		if ev.Type != nameresolve.EventPut || ev.Key != key {
			t.Fatalf("event after the restart = %+v; want the re-add put", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch opened before the restart delivered nothing after it")
	}
	// And it stays past the old lease's lifetime.
	time.Sleep(1500 * time.Millisecond)
	if v, err := r.Get(ctx, key); err != nil || v != "127.0.0.1:1234" {
		t.Fatalf("Get after the restart = %q, %v", v, err)
	}
}

// TestOpenUnreachable: a closed port gives one clear line wrapping
// ErrUnavailable, within about DialTimeout.
func TestOpenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	start := time.Now()
	const dial = 500 * time.Millisecond
	_, err = etcd.Open(context.Background(), etcd.Config{Endpoints: []string{addr}, DialTimeout: dial})
	took := time.Since(start)
	if !errors.Is(err, nameresolve.ErrUnavailable) {
		t.Fatalf("Open = %v; want ErrUnavailable", err)
	}
	msg := err.Error()
	want := "name resolve: etcd at " + addr + " is unreachable ("
	if !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") {
		t.Fatalf("message %q; want one line starting %q", msg, want)
	}
	if took > dial+time.Second {
		t.Fatalf("Open took %v with DialTimeout %v", took, dial)
	}
	t.Logf("%v (after %v)", msg, took.Round(time.Millisecond))
}

// TestUnavailableAfterServerStops: calls on a repository whose etcd has
// gone fail with ErrUnavailable, and Close does not hang.
func TestUnavailableAfterServerStops(t *testing.T) {
	ctx := context.Background()
	srv, err := etcdserver.Start(ctx, etcdserver.Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, srv.Endpoint())
	if err := r.Add(ctx, "k", "v", nameresolve.AddOptions{TTL: 5 * time.Second, DeleteOnExit: true}); err != nil {
		t.Fatal(err)
	}
	_ = srv.Close()

	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := r.Get(cctx, "k"); !errors.Is(err, nameresolve.ErrUnavailable) {
		t.Fatalf("Get with etcd down = %v; want ErrUnavailable", err)
	}
	start := time.Now()
	err = r.Close()
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Close with etcd down took %v", d)
	}
	t.Logf("Close with etcd down: %v after %v", err, time.Since(start).Round(time.Millisecond))
}

// TestCloseKeepsReplacedRecord: DeleteOnExit removes only what is still
// ours; a record another repository replaced survives our Close.
func TestCloseKeepsReplacedRecord(t *testing.T) {
	ctx := context.Background()
	key := fmt.Sprintf("test/replaced/%d", time.Now().UnixNano())
	old, fresh := open(t), open(t)
	if err := old.Add(ctx, key, "old", nameresolve.AddOptions{DeleteOnExit: true, TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Add(ctx, key, "new", nameresolve.AddOptions{Replace: true, TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if v, err := fresh.Get(ctx, key); err != nil || v != "new" {
		t.Fatalf("Get after the old owner closed = %q, %v; want new", v, err)
	}
}
