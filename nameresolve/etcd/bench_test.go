package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve"
)

// latencies records per-operation times and reports their p50 and p99.
type latencies []time.Duration

func (l *latencies) time(op func()) {
	start := time.Now()
	op()
	*l = append(*l, time.Since(start))
}

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	at := func(q float64) float64 {
		return float64(l[int(q*float64(len(l)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
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
	var lat latencies
	i := 0
	for b.Loop() {
		key := prefix + fmt.Sprint(i)
		i++
		lat.time(func() {
			if err := r.Add(ctx, key, "127.0.0.1:1234", opts); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
}

func BenchmarkEtcdGet(b *testing.B) {
	ctx := context.Background()
	r := open(b)
	key := benchPrefix(b, r) + "k"
	if err := r.Add(ctx, key, "127.0.0.1:1234", nameresolve.AddOptions{}); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	for b.Loop() {
		lat.time(func() {
			if _, err := r.Get(ctx, key); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
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
		var lat latencies
		for b.Loop() {
			lat.time(func() {
				if _, err := r.Wait(ctx, key); err != nil {
					b.Fatal(err)
				}
			})
		}
		lat.report(b)
	})
	b.Run("added", func(b *testing.B) {
		waiter, adder := open(b), open(b)
		prefix := benchPrefix(b, adder)
		var lat latencies
		i := 0
		for b.Loop() {
			key := prefix + fmt.Sprint(i)
			i++
			lat.time(func() {
				got := make(chan error, 1)
				go func() {
					_, err := waiter.Wait(ctx, key)
					got <- err
				}()
				if err := adder.Add(ctx, key, "v", nameresolve.AddOptions{}); err != nil {
					b.Fatal(err)
				}
				if err := <-got; err != nil {
					b.Fatal(err)
				}
			})
		}
		lat.report(b)
	})
}
