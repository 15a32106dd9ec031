package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/benchutil"
	"github.com/distrl/distrl/nameresolve"
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
