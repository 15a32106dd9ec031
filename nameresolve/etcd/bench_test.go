package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/benchutil"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
)

// timeEach runs op once per benchmark iteration, with the iteration's
// index, and reports the latencies' p50 and p99.
func timeEach(b *testing.B, op func(i int) error) {
	var lat benchutil.Latencies
	lat.Start(0)
	for i := 0; b.Loop(); i++ {
		lat.Time(func() {
			if err := op(i); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.Report(b, "us")
}

// benchPrefix returns a key space unique to this benchmark run, cleared afterwards.
func benchPrefix(b *testing.B, r nameresolve.Repository) string {
	prefix := fmt.Sprintf("bench/%s/%d/", b.Name(), time.Now().UnixNano())
	b.Cleanup(func() { _ = r.ClearSubtree(context.Background(), prefix) })
	return prefix
}

// BenchmarkEtcdAdd adds fresh keys without Replace (a create-if-absent
// transaction), on a lease as workers do.
func BenchmarkEtcdAdd(b *testing.B) {
	ctx := context.Background()
	r := open(b)
	prefix := benchPrefix(b, r)
	opts := nameresolve.AddOptions{TTL: 10 * time.Second}
	timeEach(b, func(i int) error {
		return r.Add(ctx, prefix+fmt.Sprint(i), "127.0.0.1:1234", opts)
	})
}

func BenchmarkEtcdGet(b *testing.B) {
	ctx := context.Background()
	r := open(b)
	key := benchPrefix(b, r) + "k"
	if err := r.Add(ctx, key, "127.0.0.1:1234", nameresolve.AddOptions{}); err != nil {
		b.Fatal(err)
	}
	timeEach(b, func(int) error {
		_, err := r.Get(ctx, key)
		return err
	})
}

// BenchmarkEtcdWait/present: the key exists, so Wait is one Get.
// BenchmarkEtcdWait/added: a waiter starts Wait and another repository adds
// the key at the same moment; the time is from the start of both until Wait
// returns, i.e. how long a consumer takes to see a freshly published name.
// (Most waits are already watching when the Add lands; some find the key on
// their first Get.)
func BenchmarkEtcdWait(b *testing.B) {
	ctx := context.Background()
	b.Run("present", func(b *testing.B) {
		r := open(b)
		key := benchPrefix(b, r) + "k"
		if err := r.Add(ctx, key, "v", nameresolve.AddOptions{}); err != nil {
			b.Fatal(err)
		}
		timeEach(b, func(int) error {
			_, err := r.Wait(ctx, key)
			return err
		})
	})
	b.Run("added", func(b *testing.B) {
		waiter, adder := open(b), open(b)
		prefix := benchPrefix(b, adder)
		timeEach(b, func(i int) error {
			key := prefix + fmt.Sprint(i)
			got := make(chan error, 1)
			go func() {
				_, err := waiter.Wait(ctx, key)
				got <- err
			}()
			if err := adder.Add(ctx, key, "v", nameresolve.AddOptions{}); err != nil {
				return err
			}
			return <-got
		})
	})
}

// secureBenches are the ways to meet etcd that BenchmarkEtcdOpen and
// BenchmarkEtcdGetSecure compare, each against an etcd of its own.
func secureBenches(b *testing.B) []struct {
	name string
	cfg  etcd.Config
} {
	tlsSrv := etcdtest.StartSecure(b, etcdtest.Secure{TLS: true})
	authSrv := etcdtest.StartSecure(b, etcdtest.Secure{TLS: true, Auth: true})
	certSrv := etcdtest.StartSecure(b, etcdtest.Secure{ClientCertAuth: true, Auth: true})
	password := etcd.Security{CACert: authSrv.PKI.CA, User: etcdtest.User, Password: etcdtest.Password}
	cert := etcd.Security{CACert: certSrv.PKI.CA, Cert: certSrv.PKI.ClientCert, Key: certSrv.PKI.ClientKey}
	return []struct {
		name string
		cfg  etcd.Config
	}{
		{"plain", etcd.Config{Endpoints: []string{endpoint}}},
		{"tls", etcd.Config{Endpoints: []string{tlsSrv.Endpoint()}, Security: etcd.Security{CACert: tlsSrv.PKI.CA}}},
		{"tls+password", etcd.Config{Endpoints: []string{authSrv.Endpoint()}, Security: password}},
		{"client-cert", etcd.Config{Endpoints: []string{certSrv.Endpoint()}, Security: cert}},
	}
}

// BenchmarkEtcdOpen: Open (connect, authenticate, probe) and Close, plain
// and secured. The test etcds hash passwords at bcrypt's lowest cost;
// etcd's default (10) adds tens of milliseconds to each password login.
func BenchmarkEtcdOpen(b *testing.B) {
	for _, bc := range secureBenches(b) {
		b.Run(bc.name, func(b *testing.B) {
			timeEach(b, func(int) error {
				r, err := etcd.Open(context.Background(), bc.cfg)
				if err != nil {
					return err
				}
				return r.Close()
			})
		})
	}
}

// BenchmarkEtcdGetSecure: one Get on an open repository, plain and secured.
func BenchmarkEtcdGetSecure(b *testing.B) {
	ctx := context.Background()
	for _, bc := range secureBenches(b) {
		b.Run(bc.name, func(b *testing.B) {
			r, err := etcd.Open(ctx, bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			key := "distrl/bench/get-secure"
			if err := r.Add(ctx, key, "127.0.0.1:1234", nameresolve.AddOptions{Replace: true}); err != nil {
				b.Fatal(err)
			}
			timeEach(b, func(int) error {
				_, err := r.Get(ctx, key)
				return err
			})
		})
	}
}

// BenchmarkEtcdResolveAll is what resolving every worker of a trial costs a
// control panel, per group request, for 64 and 4096 address records:
// listing them (Find) against syncing a mirror of them (one progress
// request on its watch stream, then reads from memory).
func BenchmarkEtcdResolveAll(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{64, 4096} {
		r := open(b)
		prefix := benchPrefix(b, r)
		for i := range n {
			if err := r.Add(ctx, fmt.Sprintf("%secho/%d", prefix, i), "127.0.0.1:1234", nameresolve.AddOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("find/records=%d", n), func(b *testing.B) {
			timeEach(b, func(int) error {
				_, err := r.Find(ctx, prefix)
				return err
			})
		})
		b.Run(fmt.Sprintf("mirror-sync/records=%d", n), func(b *testing.B) {
			m, err := r.Mirror(ctx, prefix)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			timeEach(b, func(int) error { return m.Sync(ctx) })
		})
	}
}
