package paramstream_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/paramstream"
)

// TestOneFetchPerNode: 16 subscribers with separate sockets (as 16
// processes of one node would have) obtain a version. Sharing a cache
// directory, they cost the publisher one fetch; each with its own, 16.
func TestOneFetchPerNode(t *testing.T) {
	const (
		subs = 16
		n    = 4610
		v    = 7
	)
	tests := []struct {
		name        string
		shared      bool
		wantFetches int64
	}{
		{"shared cache", true, 1},
		{"own caches", false, subs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			pub := startPublisher(t, repo, nil)
			shared := t.TempDir()
			var fs []*follower
			for range subs {
				fs = append(fs, newFollower(newSubscriber(t, repo, func(o *paramstream.SubscriberOptions) {
					if tt.shared {
						o.CacheDir = shared
					}
				}), n))
			}
			pub.publish(t, v, paramsFor(v, n))
			// Each subscriber on a goroutine of its own, owning it, as
			// each process's worker loop would.
			ctx := ctxT(t)
			errs := make([]error, subs)
			var wg sync.WaitGroup
			for i, f := range fs {
				wg.Go(func() { errs[i] = f.until(ctx, v) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			var network, hits int64
			for _, f := range fs {
				st := f.s.Stats()
				network += st.NetworkFetches
				hits += st.CacheHits
			}
			st := pub.stats(t)
			if st.Served != tt.wantFetches || network != tt.wantFetches || hits != subs-tt.wantFetches {
				t.Errorf("publisher served %d fetches, subscribers fetched %d and hit the cache %d times; want %d, %d, %d",
					st.Served, network, hits, tt.wantFetches, tt.wantFetches, subs-tt.wantFetches)
			}
		})
	}
}

// TestCorruptCacheFile: a cache file that is damaged in any way is
// detected, removed and fetched again, and the subscriber gets the right
// data.
func TestCorruptCacheFile(t *testing.T) {
	const n = 1000
	tests := []struct {
		name    string
		corrupt func(b []byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"short header", func(b []byte) []byte { return b[:20] }},
		{"truncated data", func(b []byte) []byte { return b[:len(b)-4] }},
		{"extra data", func(b []byte) []byte { return append(b, 0, 0, 0, 0) }},
		{"flipped data bit", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"damaged count", func(b []byte) []byte { b[24]++; return b }},
		{"damaged checksum", func(b []byte) []byte { b[32] ^= 0xff; return b }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			pub := startPublisher(t, repo, nil)
			dir := t.TempDir()
			mod := func(o *paramstream.SubscriberOptions) { o.CacheDir = dir }
			first := newFollower(newSubscriber(t, repo, mod), n)
			pub.publish(t, 1, paramsFor(1, n))
			first.mustUntil(t, 1)

			files, _ := filepath.Glob(filepath.Join(dir, "v1-*.params"))
			if len(files) != 1 {
				t.Fatalf("cache files %v, want one of version 1", files)
			}
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(files[0], tt.corrupt(b), 0o600); err != nil {
				t.Fatal(err)
			}
			second := newSubscriber(t, repo, mod)
			p, err := second.Fetch(ctxT(t))
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if p.Version != 1 || !slices.Equal(p.Data, paramsFor(1, n)) {
				t.Fatalf("Fetch returned version %d with other data, want version 1", p.Version)
			}
			if st := second.Stats(); st.CorruptFiles != 1 || st.NetworkFetches != 1 || st.CacheHits != 0 {
				t.Errorf("stats %+v, want 1 corrupt file and 1 network fetch", st)
			}
			if st := pub.stats(t); st.Served != 2 {
				t.Errorf("publisher served %d fetches, want 2", st.Served)
			}
			// The file was written again and is whole.
			third := newSubscriber(t, repo, mod)
			if _, err := third.Fetch(ctxT(t)); err != nil || third.Stats().CacheHits != 1 {
				t.Errorf("after the refetch: Fetch %v, stats %+v; want a cache hit", err, third.Stats())
			}
		})
	}
}

// TestStuckLockHolder: a process that holds the node's fetch lock and
// never finishes (here: the test) delays the others by two fetch timeouts,
// after which they fetch over the network themselves. Only the lower bound
// is checked: it is the rule, and load cannot make it flaky; the upper one
// is that the parameters arrive before the test's context ends.
func TestStuckLockHolder(t *testing.T) {
	const timeout = 150 * time.Millisecond
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo, nil)
	dir := t.TempDir()
	lock, err := os.OpenFile(filepath.Join(dir, "fetch.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	s := newSubscriber(t, repo, func(o *paramstream.SubscriberOptions) { o.CacheDir, o.FetchTimeout = dir, timeout })
	pub.publish(t, 1, paramsFor(1, 8))
	start := time.Now()
	newFollower(s, 8).mustUntil(t, 1)
	if d := time.Since(start); d < 2*timeout {
		t.Errorf("obtained after %v with the lock held elsewhere, want at least %v", d, 2*timeout)
	}
	if st := s.Stats(); st.NetworkFetches != 1 || st.CacheHits != 0 {
		t.Errorf("stats %+v, want 1 network fetch and no cache hit", st)
	}
}

// TestFetchTimeout: a publisher that never answers makes Fetch fail with
// ErrUnavailable once ctx ends, and Warning say so.
func TestFetchTimeout(t *testing.T) {
	repo := workertest.Repo(t)
	pub, err := paramstream.NewPublisher(ctxT(t), paramstream.PublisherOptions{Repo: repo, Trial: testTrial})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// Published, but never polled: requests go unanswered.
	if err := pub.Publish(ctxT(t), 1, paramsFor(1, 4)); err != nil {
		t.Fatal(err)
	}
	s := newSubscriber(t, repo, func(o *paramstream.SubscriberOptions) { o.FetchTimeout = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = s.Fetch(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, paramstream.ErrUnavailable) {
		t.Fatalf("Fetch from a silent publisher: %v, want DeadlineExceeded and ErrUnavailable", err)
	}
	if w := s.Warning(); !strings.Contains(w, "version 1") {
		t.Errorf("Warning = %q, want one about version 1", w)
	}
	if st := s.Stats(); st.FetchFailures < 2 {
		t.Errorf("%d fetch failures in 300 ms with a 50 ms timeout, want several", st.FetchFailures)
	}
}

// ---- the same across real processes ----

const (
	helperEnv     = "PARAMSTREAM_TEST_HELPER"
	helperEtcd    = "PARAMSTREAM_TEST_ETCD"
	helperDir     = "PARAMSTREAM_TEST_CACHE"
	helperVersion = "PARAMSTREAM_TEST_VERSION"
	helperLen     = "PARAMSTREAM_TEST_LEN"
)

// TestSharedCacheAcrossProcesses runs subscribers in child processes (the
// test binary itself, in helper mode) sharing a cache directory, finding
// the publisher through a real etcd: the publisher serves one fetch.
func TestSharedCacheAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and child processes")
	}
	const (
		children = 4
		n        = 4610
		v        = 3
	)
	repo := etcdtest.Repo(t)
	pub := startPublisher(t, repo, func(o *paramstream.PublisherOptions) {
		o.Trial.Trial = "multiproc" // apart from the other etcd test's records
	})
	pub.publish(t, v, paramsFor(v, n))

	dir := t.TempDir()
	type result struct {
		out string
		err error
	}
	results := make(chan result, children)
	for range children {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			helperEnv+"=1", helperEtcd+"="+etcdtest.Endpoint(t), helperDir+"="+dir,
			helperVersion+"="+strconv.Itoa(v), helperLen+"="+strconv.Itoa(n))
		go func() {
			out, err := cmd.CombinedOutput()
			results <- result{string(out), err}
		}()
	}
	var network, hits int
	for range children {
		r := <-results
		if r.err != nil {
			t.Fatalf("child: %v\n%s", r.err, r.out)
		}
		var nf, ch int
		if _, err := fmt.Sscanf(lastLine(r.out), "OK network=%d cache=%d", &nf, &ch); err != nil {
			t.Fatalf("child said %q: %v", r.out, err)
		}
		network += nf
		hits += ch
	}
	if st := pub.stats(t); st.Served != 1 || network != 1 || hits != children-1 {
		t.Errorf("publisher served %d fetches; children fetched %d and hit the cache %d times; want 1, 1, %d",
			st.Served, network, hits, children-1)
	}
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

// helperMain is a child process of TestSharedCacheAcrossProcesses: it
// fetches the newest version through the shared cache directory, checks
// it, and prints its counters.
func helperMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return 1
	}
	v, _ := strconv.ParseInt(os.Getenv(helperVersion), 10, 64)
	n, _ := strconv.Atoi(os.Getenv(helperLen))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{os.Getenv(helperEtcd)}})
	if err != nil {
		return fail("open etcd: %v", err)
	}
	defer repo.Close()
	trial := testTrial
	trial.Trial = "multiproc"
	s, err := paramstream.NewSubscriber(ctx, paramstream.SubscriberOptions{
		Repo: repo, Trial: trial, CacheDir: os.Getenv(helperDir),
	})
	if err != nil {
		return fail("NewSubscriber: %v", err)
	}
	defer s.Close()
	p, err := s.Fetch(ctx)
	if err != nil {
		return fail("Fetch: %v", err)
	}
	if p.Version != v || !slices.Equal(p.Data, paramsFor(v, n)) {
		return fail("got version %d, want %d with its data", p.Version, v)
	}
	st := s.Stats()
	fmt.Printf("OK network=%d cache=%d\n", st.NetworkFetches, st.CacheHits)
	return 0
}
