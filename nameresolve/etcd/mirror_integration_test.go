package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
)

// syncedValue syncs m and returns its record under key ("" if none).
func syncedValue(ctx context.Context, m nameresolve.Mirror, key string) (string, error) {
	if err := m.Sync(ctx); err != nil {
		return "", err
	}
	v, _ := m.Get(key)
	return v, nil
}

// A progress request that etcd never answers (it drops them while a watch
// catches up) makes the mirror start over with a fresh watch and listing;
// every Sync still sees every change made before it. With a timeout of
// zero every Sync takes that path.
func TestMirrorStartsOverWithoutProgress(t *testing.T) {
	defer etcd.SetProgressTimeout(0)()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("test/mirror-over/%d/", time.Now().UnixNano())
	m, err := open(t).Mirror(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	writer := open(t)
	for i := range 30 {
		key := prefix + fmt.Sprint(i%3)
		if err := writer.Add(ctx, key, fmt.Sprint(i), nameresolve.AddOptions{Replace: true}); err != nil {
			t.Fatal(err)
		}
		if v, err := syncedValue(ctx, m, key); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("write %d: mirror has %q, %v", i, v, err)
		}
	}
}

// While etcd is down, Sync fails with ErrUnavailable and the copy keeps
// the records it had; once etcd is back, the mirror catches up by itself.
func TestMirrorSurvivesEtcdRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := startRestartable(ctx, t)
	addr := e.addr
	r := open(t, addr)
	const key = "test/mirror-restart/worker"
	if err := r.Add(ctx, key, "old", nameresolve.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := r.Mirror(ctx, "test/mirror-restart/")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if v, err := syncedValue(ctx, m, key); err != nil || v != "old" {
		t.Fatalf("before the outage: %q, %v", v, err)
	}

	e.stop()
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	err = m.Sync(sctx)
	scancel()
	if !errors.Is(err, nameresolve.ErrUnavailable) {
		t.Fatalf("Sync with etcd down = %v; want ErrUnavailable", err)
	}
	if v, ok := m.Get(key); !ok || v != "old" {
		t.Fatalf("copy during the outage: %q, %v; want the last record", v, ok)
	}
	// Opening a mirror meanwhile gives up with the caller's context.
	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	begin := time.Now()
	_, err = r.Mirror(octx, "test/mirror-restart/")
	ocancel()
	if err == nil || time.Since(begin) > 3*time.Second {
		t.Fatalf("Mirror with etcd down = %v after %v; want an error within the context's 300 ms", err, time.Since(begin))
	}

	e.restart(ctx)
	defer e.stop()
	defer r.Close() // before the server, or its Close waits on our streams
	writer := rawClient(t, addr)
	if _, err := writer.Put(ctx, key, "new"); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 20*time.Second, "the mirror catches up after the restart", func() error {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		if v, err := syncedValue(sctx, m, key); err != nil || v != "new" {
			return fmt.Errorf("%q, %v", v, err)
		}
		return nil
	})
}
