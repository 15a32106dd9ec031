package nrtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/distrl/distrl/nameresolve"
)

// mirror opens a Mirror of prefix on e.repo, closed at the end of the test.
func (e *env) mirror(prefix string) nameresolve.Mirror {
	e.t.Helper()
	m, err := e.repo.Mirror(e.ctx, prefix)
	if err != nil {
		e.t.Fatalf("Mirror(%q): %v", prefix, err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	return m
}

// wantMirrored syncs m and checks that it holds exactly want.
func (e *env) wantMirrored(m nameresolve.Mirror, want map[string]string) {
	e.t.Helper()
	if err := m.Sync(e.ctx); err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
	got := map[string]string{}
	for _, en := range m.Entries() {
		got[en.Key] = en.Value
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("mirror holds %v; want %v", got, want)
	}
	for k, v := range want {
		if g, ok := m.Get(k); !ok || g != v {
			e.t.Fatalf("mirror Get(%q) = %q, %v; want %q", k, g, ok, v)
		}
	}
}

// A mirror starts with the records already there, holds nothing outside
// its prefix, and after Sync holds every change another repository made
// before: puts, replacements and deletes, read at once with no waiting.
func testMirror(e *env) {
	e.add(e.repo, e.key("m/before"), "0", nameresolve.AddOptions{})
	e.add(e.repo, e.key("mx"), "outside", nameresolve.AddOptions{})
	m := e.mirror(e.key("m/"))
	want := map[string]string{e.key("m/before"): "0"}
	e.wantMirrored(m, want)
	other := e.open()
	for i := range 50 {
		v0 := m.Version()
		k := e.key(fmt.Sprintf("m/%d", i%7))
		switch i % 3 {
		case 0, 1:
			e.add(other, k, fmt.Sprint(i), nameresolve.AddOptions{Replace: true})
			want[k] = fmt.Sprint(i)
		case 2:
			err := other.Delete(e.ctx, k)
			if err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
				e.t.Fatalf("Delete: %v", err)
			}
			if err != nil {
				continue
			}
			delete(want, k)
		}
		e.add(other, e.key("mx"), fmt.Sprint(i), nameresolve.AddOptions{Replace: true})
		e.wantMirrored(m, want)
		if m.Version() == v0 {
			e.t.Fatalf("change %d: Version stayed %d", i, v0)
		}
	}
	if _, ok := m.Get(e.key("mx")); ok {
		e.t.Fatal("mirror holds a record outside its prefix")
	}
}

// Syncs from many goroutines, each after its own write, each see it.
func testMirrorConcurrentSync(e *env) {
	m := e.mirror(e.key("c/"))
	other := e.open()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				k, v := e.key(fmt.Sprintf("c/%d", g)), fmt.Sprint(i)
				if err := other.Add(e.ctx, k, v, nameresolve.AddOptions{Replace: true}); err != nil {
					errs <- err
					return
				}
				if err := m.Sync(e.ctx); err != nil {
					errs <- err
					return
				}
				if got, ok := m.Get(k); !ok || got != v {
					errs <- fmt.Errorf("after Sync, %s = %q, %v; want %q", k, got, ok, v)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
}

// A closed mirror, or one of a closed repository, says ErrClosed, and a
// context that ends is respected.
func testMirrorClose(e *env) {
	m := e.mirror(e.key("x/"))
	if err := m.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	if err := m.Sync(e.ctx); !errors.Is(err, nameresolve.ErrClosed) {
		e.t.Fatalf("Sync after Close = %v; want ErrClosed", err)
	}
	m2 := e.mirror(e.key("x/"))
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := m2.Sync(ctx); !errors.Is(err, context.Canceled) && !errors.Is(err, nameresolve.ErrClosed) {
		// A closed mirror may say either; an open one must honour ctx.
		e.t.Fatalf("Sync with a canceled context = %v; want context.Canceled", err)
	}
	if err := e.repo.Close(); err != nil {
		e.t.Fatalf("repository Close: %v", err)
	}
	if err := m2.Sync(e.ctx); !errors.Is(err, nameresolve.ErrClosed) {
		e.t.Fatalf("Sync after the repository closed = %v; want ErrClosed", err)
	}
	if _, err := e.repo.Mirror(e.ctx, e.key("x/")); !errors.Is(err, nameresolve.ErrClosed) {
		e.t.Fatalf("Mirror after Close = %v; want ErrClosed", err)
	}
}

// The context given to Mirror bounds the opening only: the mirror goes on
// following changes after it ends.
func testMirrorOutlivesContext(e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	m, err := e.repo.Mirror(ctx, e.key("o/"))
	if err != nil {
		e.t.Fatalf("Mirror: %v", err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	cancel()
	e.add(e.open(), e.key("o/a"), "1", nameresolve.AddOptions{})
	e.wantMirrored(m, map[string]string{e.key("o/a"): "1"})
}
