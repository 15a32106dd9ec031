package nrtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve"
)

// NewRepo opens a repository on the backend under test. Every call within
// one RunConformance must reach the same records (a second call stands in for
// a second process), and each call must return a fresh, independently
// closable repository. RunConformance closes every repository it opens.
type NewRepo func(t *testing.T) nameresolve.Repository

// opTimeout bounds each subtest's operations so a broken backend fails the
// test instead of hanging it.
const opTimeout = 10 * time.Second

// seq makes key spaces unique across subtests and -count runs, because
// backends are usually shared by the whole test binary.
var seq atomic.Int64

// env is one subtest's view: a repository, a way to open a second one on the
// same backend, and a private key space.
type env struct {
	t    *testing.T
	ctx  context.Context
	repo nameresolve.Repository
	open func() nameresolve.Repository
	ns   string
}

// key returns a key inside the subtest's private key space.
func (e *env) key(s string) string { return e.ns + s }

func (e *env) add(r nameresolve.Repository, key, value string, opts nameresolve.AddOptions) {
	e.t.Helper()
	if err := r.Add(e.ctx, key, value, opts); err != nil {
		e.t.Fatalf("Add(%q): %v", key, err)
	}
}

func (e *env) wantValue(r nameresolve.Repository, key, want string) {
	e.t.Helper()
	got, err := r.Get(e.ctx, key)
	if err != nil || got != want {
		e.t.Fatalf("Get(%q) = %q, %v; want %q, nil", key, got, err, want)
	}
}

func (e *env) wantNotFound(r nameresolve.Repository, key string) {
	e.t.Helper()
	if got, err := r.Get(e.ctx, key); !errors.Is(err, nameresolve.ErrNotFound) {
		e.t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

// RunConformance runs the Repository contract tests as subtests of t.
func RunConformance(t *testing.T, newRepo NewRepo) {
	tests := []struct {
		name string
		fn   func(e *env)
	}{
		{"AddGet", testAddGet},
		{"AddExisting", testAddExisting},
		{"Replace", testReplace},
		{"GetMissing", testGetMissing},
		{"EmptyKey", testEmptyKey},
		{"Delete", testDelete},
		{"FindPrefixBoundary", testFind},
		{"ClearSubtree", testClearSubtree},
		{"WaitExisting", testWaitExisting},
		{"WaitAddedLater", testWaitAddedLater},
		{"WaitDeadline", testWaitDeadline},
		{"WaitUnblockedByClose", testWaitUnblockedByClose},
		{"Watch", testWatch},
		{"CloseRemovesOwnedRecords", testCloseRemovesOwned},
		{"AfterClose", testAfterClose},
		{"Mirror", testMirror},
		{"MirrorConcurrentSync", testMirrorConcurrentSync},
		{"MirrorClose", testMirrorClose},
		{"MirrorOutlivesContext", testMirrorOutlivesContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			t.Cleanup(cancel)
			open := func() nameresolve.Repository {
				r := newRepo(t)
				t.Cleanup(func() { _ = r.Close() })
				return r
			}
			e := &env{
				t:    t,
				ctx:  ctx,
				open: open,
				ns:   fmt.Sprintf("nrtest/%d-%d/%s/", time.Now().UnixNano(), seq.Add(1), tc.name),
			}
			e.repo = open()
			tc.fn(e)
		})
	}
}

func testAddGet(e *env) {
	e.add(e.repo, e.key("k"), "v", nameresolve.AddOptions{})
	e.wantValue(e.repo, e.key("k"), "v")
	// A second repository sees the record too.
	e.wantValue(e.open(), e.key("k"), "v")
}

func testAddExisting(e *env) {
	e.add(e.repo, e.key("k"), "v1", nameresolve.AddOptions{})
	err := e.repo.Add(e.ctx, e.key("k"), "v2", nameresolve.AddOptions{})
	if !errors.Is(err, nameresolve.ErrKeyExists) {
		e.t.Fatalf("second Add = %v; want ErrKeyExists", err)
	}
	e.wantValue(e.repo, e.key("k"), "v1")
}

func testReplace(e *env) {
	cases := []nameresolve.AddOptions{
		{Replace: true},
		{Replace: true, TTL: 5 * time.Second},
		{Replace: true, DeleteOnExit: true},
	}
	e.add(e.repo, e.key("k"), "v0", nameresolve.AddOptions{})
	for i, opts := range cases {
		v := fmt.Sprintf("v%d", i+1)
		e.add(e.repo, e.key("k"), v, opts)
		e.wantValue(e.repo, e.key("k"), v)
	}
	// Replace also creates a missing record.
	e.add(e.repo, e.key("new"), "n", nameresolve.AddOptions{Replace: true})
	e.wantValue(e.repo, e.key("new"), "n")
}

func testGetMissing(e *env) {
	e.wantNotFound(e.repo, e.key("missing"))
}

func testEmptyKey(e *env) {
	if err := e.repo.Add(e.ctx, "", "v", nameresolve.AddOptions{}); err == nil {
		e.t.Fatal("Add with empty key succeeded")
	}
	if err := e.repo.ClearSubtree(e.ctx, ""); err == nil {
		e.t.Fatal("ClearSubtree of the empty prefix succeeded")
	}
}

func testDelete(e *env) {
	e.add(e.repo, e.key("k"), "v", nameresolve.AddOptions{})
	if err := e.repo.Delete(e.ctx, e.key("k")); err != nil {
		e.t.Fatalf("Delete: %v", err)
	}
	e.wantNotFound(e.repo, e.key("k"))
	if err := e.repo.Delete(e.ctx, e.key("k")); !errors.Is(err, nameresolve.ErrNotFound) {
		e.t.Fatalf("Delete missing = %v; want ErrNotFound", err)
	}
	// A deleted key can be added again without Replace.
	e.add(e.repo, e.key("k"), "v2", nameresolve.AddOptions{})
	e.wantValue(e.repo, e.key("k"), "v2")
}

// addTree adds the keys used by the prefix tests: "a/b/" must match a/b/1
// and a/b/2 but neither a/b itself nor the sibling a/bc.
func addTree(e *env) {
	for _, k := range []string{"a/b/2", "a/bc", "a/b/1", "a/b", "a/b/1/x"} {
		e.add(e.repo, e.key(k), "val-"+k, nameresolve.AddOptions{})
	}
}

func testFind(e *env) {
	addTree(e)
	cases := []struct {
		prefix string
		want   []string
	}{
		{"a/b/", []string{"a/b/1", "a/b/1/x", "a/b/2"}},
		{"a/b", []string{"a/b", "a/b/1", "a/b/1/x", "a/b/2", "a/bc"}},
		{"a/bc", []string{"a/bc"}},
		{"a/z", nil},
	}
	for _, c := range cases {
		got, err := e.repo.Find(e.ctx, e.key(c.prefix))
		if err != nil {
			e.t.Fatalf("Find(%q): %v", c.prefix, err)
		}
		if len(got) != len(c.want) {
			e.t.Fatalf("Find(%q) = %v; want keys %v", c.prefix, got, c.want)
		}
		for i, w := range c.want {
			if got[i].Key != e.key(w) || got[i].Value != "val-"+w {
				e.t.Fatalf("Find(%q)[%d] = %+v; want key %q", c.prefix, i, got[i], e.key(w))
			}
		}
	}
}

func testClearSubtree(e *env) {
	addTree(e)
	if err := e.repo.ClearSubtree(e.ctx, e.key("a/b/")); err != nil {
		e.t.Fatalf("ClearSubtree: %v", err)
	}
	for _, k := range []string{"a/b/1", "a/b/2", "a/b/1/x"} {
		e.wantNotFound(e.repo, e.key(k))
	}
	for _, k := range []string{"a/b", "a/bc"} {
		e.wantValue(e.repo, e.key(k), "val-"+k)
	}
	// Clearing an empty subtree is not an error.
	if err := e.repo.ClearSubtree(e.ctx, e.key("nothing/")); err != nil {
		e.t.Fatalf("ClearSubtree of an empty subtree: %v", err)
	}
}

func testWaitExisting(e *env) {
	e.add(e.repo, e.key("k"), "v", nameresolve.AddOptions{})
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	got, err := e.repo.Wait(ctx, e.key("k"))
	if err != nil || got != "v" {
		e.t.Fatalf("Wait = %q, %v; want v", got, err)
	}
}

func testWaitAddedLater(e *env) {
	other := e.open()
	errc := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		// A different key first: Wait must keep waiting through it.
		if err := other.Add(e.ctx, e.key("k-other"), "x", nameresolve.AddOptions{}); err != nil {
			errc <- err
			return
		}
		errc <- other.Add(e.ctx, e.key("k"), "later", nameresolve.AddOptions{})
	}()
	got, err := e.repo.Wait(e.ctx, e.key("k"))
	if err != nil || got != "later" {
		e.t.Fatalf("Wait = %q, %v; want later", got, err)
	}
	if err := <-errc; err != nil {
		e.t.Fatalf("Add from the other repository: %v", err)
	}
}

func testWaitDeadline(e *env) {
	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.repo.Wait(ctx, e.key("never"))
	if !errors.Is(err, context.DeadlineExceeded) {
		e.t.Fatalf("Wait = %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		e.t.Fatalf("Wait returned %v after its deadline", d)
	}
}

func testWaitUnblockedByClose(e *env) {
	errc := make(chan error, 1)
	go func() {
		_, err := e.repo.Wait(e.ctx, e.key("never"))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := e.repo.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, nameresolve.ErrClosed) {
			e.t.Fatalf("Wait during Close = %v; want ErrClosed", err)
		}
	case <-e.ctx.Done():
		e.t.Fatal("Wait did not return after Close")
	}
}

// recv returns the next event or fails the test if none comes in time.
func recv(e *env, ch <-chan nameresolve.Event) nameresolve.Event {
	e.t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			e.t.Fatal("watch channel closed early")
		}
		return ev
	case <-time.After(5 * time.Second):
		e.t.Fatal("no watch event within 5s")
	}
	return nameresolve.Event{}
}

// waitClosed fails the test unless ch closes soon, draining stray events.
func waitClosed(e *env, ch <-chan nameresolve.Event) {
	e.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			e.t.Fatal("watch channel not closed within 5s")
		}
	}
}

func testWatch(e *env) {
	wctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := e.repo.Watch(wctx, e.key("w/"))
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	other := e.open()
	e.add(other, e.key("w/a"), "1", nameresolve.AddOptions{})
	e.add(other, e.key("wx"), "outside", nameresolve.AddOptions{})
	e.add(other, e.key("w/b"), "2", nameresolve.AddOptions{})
	e.add(other, e.key("w/a"), "3", nameresolve.AddOptions{Replace: true})
	if err := other.Delete(e.ctx, e.key("w/a")); err != nil {
		e.t.Fatalf("Delete: %v", err)
	}
	want := []nameresolve.Event{
		{Type: nameresolve.EventPut, Key: e.key("w/a"), Value: "1"},
		{Type: nameresolve.EventPut, Key: e.key("w/b"), Value: "2"},
		{Type: nameresolve.EventPut, Key: e.key("w/a"), Value: "3"},
		{Type: nameresolve.EventDelete, Key: e.key("w/a")},
	}
	for i, w := range want {
		if got := recv(e, ch); got != w {
			e.t.Fatalf("event %d = %+v (%v); want %+v (%v)", i, got, got.Type, w, w.Type)
		}
	}
	cancel()
	waitClosed(e, ch)
}

func testCloseRemovesOwned(e *env) {
	e.add(e.repo, e.key("exit"), "v", nameresolve.AddOptions{DeleteOnExit: true})
	e.add(e.repo, e.key("ttl"), "v", nameresolve.AddOptions{TTL: 5 * time.Second})
	e.add(e.repo, e.key("keep"), "v", nameresolve.AddOptions{})
	ch, err := e.repo.Watch(e.ctx, e.key(""))
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	if err := e.repo.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	waitClosed(e, ch)
	other := e.open()
	e.wantNotFound(other, e.key("exit"))
	e.wantNotFound(other, e.key("ttl"))
	e.wantValue(other, e.key("keep"), "v")
	if err := e.repo.Close(); err != nil {
		e.t.Fatalf("second Close: %v", err)
	}
}

func testAfterClose(e *env) {
	e.add(e.repo, e.key("k"), "v", nameresolve.AddOptions{})
	if err := e.repo.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	r, ctx, k := e.repo, e.ctx, e.key("k")
	ops := []struct {
		name string
		call func() error
	}{
		{"Add", func() error { return r.Add(ctx, k, "v", nameresolve.AddOptions{Replace: true}) }},
		{"Get", func() error { _, err := r.Get(ctx, k); return err }},
		{"Wait", func() error { _, err := r.Wait(ctx, k); return err }},
		{"Find", func() error { _, err := r.Find(ctx, k); return err }},
		{"Delete", func() error { return r.Delete(ctx, k) }},
		{"ClearSubtree", func() error { return r.ClearSubtree(ctx, k) }},
		{"Watch", func() error { _, err := r.Watch(ctx, k); return err }},
	}
	for _, op := range ops {
		if err := op.call(); !errors.Is(err, nameresolve.ErrClosed) {
			e.t.Errorf("%s after Close = %v; want ErrClosed", op.name, err)
		}
	}
}
