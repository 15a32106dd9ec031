package nameresolve_test

import (
	"context"
	"testing"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/nrtest"
)

func TestMemoryConformance(t *testing.T) {
	// One store for the whole run, like one etcd for the whole binary: every
	// repository is a Peer, so a second repository sees the first one's records.
	base := nameresolve.NewMemory()
	t.Cleanup(func() { _ = base.Close() })
	nrtest.RunConformance(t, func(*testing.T) nameresolve.Repository { return base.Peer() })
}

func TestMemoryTTLDoesNotExpire(t *testing.T) {
	m := nameresolve.NewMemory()
	defer m.Close()
	ctx := context.Background()
	if err := m.Add(ctx, "k", "v", nameresolve.AddOptions{TTL: 1}); err != nil {
		t.Fatal(err)
	}
	// TTL of a nanosecond: still there, because only Close removes it.
	if v, err := m.Get(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

func BenchmarkMemoryGet(b *testing.B) {
	m := nameresolve.NewMemory()
	defer m.Close()
	ctx := context.Background()
	if err := m.Add(ctx, "distrl/e/t/worker/actor/0", "127.0.0.1:1", nameresolve.AddOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Get(ctx, "distrl/e/t/worker/actor/0"); err != nil {
			b.Fatal(err)
		}
	}
}
