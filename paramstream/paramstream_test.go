package paramstream_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/paramstream"
)

// TestFollowNewest publishes v1..v3 to subscribers that poll all along,
// and to one that does not look until the end: the former see each
// version in order, the latter jumps straight to the newest.
func TestFollowNewest(t *testing.T) {
	const n = 4610 // a CartPole [64, 64] actor-critic
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo, nil)
	var eager []*follower
	for range 3 {
		eager = append(eager, newFollower(newSubscriber(t, repo, nil), n))
	}
	late := newFollower(newSubscriber(t, repo, nil), n)

	for v := int64(1); v <= 3; v++ {
		pub.publish(t, v, paramsFor(v, n))
		for _, f := range eager {
			f.mustUntil(t, v)
		}
	}
	for i, f := range eager {
		if !slices.Equal(f.got, []int64{1, 2, 3}) {
			t.Errorf("subscriber %d got versions %v, want [1 2 3]", i, f.got)
		}
	}
	late.mustUntil(t, 3)
	if !slices.Equal(late.got, []int64{3}) {
		t.Errorf("subscriber that missed the notifications got %v, want [3]", late.got)
	}
	if p, err := late.s.Poll(ctxT(t)); p != nil || err != nil {
		t.Errorf("Poll with nothing new = %v, %v; want nil, nil", p, err)
	}
	st := pub.stats(t)
	if st.Version != 3 || st.Published != 3 || st.Malformed != 0 {
		t.Errorf("publisher stats %+v", st)
	}
}

// TestSizes round-trips vectors of several sizes, through the network
// alone and through the node cache.
func TestSizes(t *testing.T) {
	for _, n := range []int{0, 1, 4610, 1 << 20} {
		for _, noCache := range []bool{false, true} {
			name := map[bool]string{false: "cache", true: "nocache"}[noCache]
			t.Run(name+"/"+strconv.Itoa(n), func(t *testing.T) {
				repo := workertest.Repo(t)
				pub := startPublisher(t, repo, nil)
				dir := t.TempDir()
				mod := func(o *paramstream.SubscriberOptions) { o.CacheDir, o.NoCache = dir, noCache }
				a := newFollower(newSubscriber(t, repo, mod), n)
				pub.publish(t, 1, paramsFor(1, n))
				a.mustUntil(t, 1)
				// A second subscriber reads the first one's file, or
				// fetches for itself without a cache.
				b := newFollower(newSubscriber(t, repo, mod), n)
				b.mustUntil(t, 1)
				st := b.s.Stats()
				if wantHits := map[bool]int64{false: 1, true: 0}[noCache]; st.CacheHits != wantHits || st.NetworkFetches != 1-wantHits {
					t.Errorf("second subscriber: %d cache hits, %d network fetches; want %d and %d",
						st.CacheHits, st.NetworkFetches, wantHits, 1-wantHits)
				}
			})
		}
	}
}

// TestLateJoiner: a subscriber created after v5 was published starts
// from v5 with Fetch, and Poll then has nothing new for it.
func TestLateJoiner(t *testing.T) {
	const n = 100
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo, nil)
	for v := int64(1); v <= 5; v++ {
		pub.publish(t, v, paramsFor(v, n))
	}
	s := newSubscriber(t, repo, nil)
	p, err := s.Fetch(ctxT(t))
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if p.Version != 5 || p.Policy != paramstream.DefaultPolicy || !slices.Equal(p.Data, paramsFor(5, n)) {
		t.Fatalf("Fetch = version %d policy %q, want version 5 of %q with its data", p.Version, p.Policy, paramstream.DefaultPolicy)
	}
	if p, err := s.Poll(ctxT(t)); p != nil || err != nil {
		t.Errorf("Poll after Fetch = %v, %v; want nil, nil", p, err)
	}
	// Fetch again returns the same version, from the cache now.
	if p, err := s.Fetch(ctxT(t)); err != nil || p.Version != 5 {
		t.Fatalf("second Fetch = %v, %v", p, err)
	}
	if st := s.Stats(); st.NetworkFetches != 1 || st.CacheHits != 1 || st.Version != 5 {
		t.Errorf("stats %+v, want 1 network fetch, 1 cache hit, version 5", st)
	}
}

// TestNoPublisher: without a record Fetch fails at once and Poll has
// nothing; when a publisher appears the subscriber follows it.
func TestNoPublisher(t *testing.T) {
	repo := workertest.Repo(t)
	s := newSubscriber(t, repo, nil)
	start := time.Now()
	if _, err := s.Fetch(ctxT(t)); !errors.Is(err, paramstream.ErrNoPublisher) {
		t.Fatalf("Fetch with no publisher: %v, want ErrNoPublisher", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Fetch with no publisher took %v; it should not wait", d)
	}
	if p, err := s.Poll(ctxT(t)); p != nil || err != nil {
		t.Fatalf("Poll = %v, %v", p, err)
	}
	pub := startPublisher(t, repo, nil)
	pub.publish(t, 1, paramsFor(1, 10))
	newFollower(s, 10).mustUntil(t, 1)
}

// TestPublisherRestart: the record moves to another publisher; the
// subscribers follow it and get its versions.
func TestPublisherRestart(t *testing.T) {
	tests := []struct {
		name       string
		closeFirst bool  // the old publisher closes before the new one starts
		next       int64 // the new publisher's first version
	}{
		{"after close", true, 2},
		{"while the old one lives", false, 2},
		// A trainer restarted from a checkpoint counts from an older
		// version; its parameters are the ones to use.
		{"from an older checkpoint", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 64
			repo := workertest.Repo(t)
			a := startPublisher(t, repo, nil)
			subs := []*follower{
				newFollower(newSubscriber(t, repo, nil), n),
				newFollower(newSubscriber(t, repo, nil), n),
			}
			a.publish(t, 1, paramsFor(1, n))
			for _, f := range subs {
				f.mustUntil(t, 1)
			}
			if tt.closeFirst {
				a.close()
				// The record is gone: the subscribers keep what they have.
				for _, f := range subs {
					eventually.True(t, 10*time.Second, "the record's removal to be seen", func() bool {
						p, err := f.s.Poll(ctxT(t))
						if p != nil || err != nil {
							t.Fatalf("Poll without a publisher = %v, %v", p, err)
						}
						_, err = f.s.Fetch(ctxT(t))
						return errors.Is(err, paramstream.ErrNoPublisher)
					})
					if v := f.s.Stats().Version; v != 1 {
						t.Errorf("version %d after the publisher left, want 1", v)
					}
				}
			}
			b := startPublisher(t, repo, nil)
			if b.pub.FetchAddr() == a.pub.FetchAddr() {
				t.Fatal("the new publisher has the old one's address")
			}
			b.publish(t, tt.next, paramsFor(tt.next, n))
			for i, f := range subs {
				f.got = nil // versions restart with the new publisher
				f.mustUntil(t, tt.next)
				if !slices.Equal(f.got, []int64{tt.next}) {
					t.Errorf("subscriber %d got %v from the new publisher, want [%d]", i, f.got, tt.next)
				}
			}
			b.publish(t, tt.next+1, paramsFor(tt.next+1, n))
			for _, f := range subs {
				f.mustUntil(t, tt.next+1)
			}
			if !tt.closeFirst {
				// The old publisher leaves the new one's record alone.
				a.close()
				if _, err := repo.Get(ctxT(t), testTrial.Params(paramstream.DefaultPolicy)); err != nil {
					t.Errorf("the old publisher's Close removed the new one's record: %v", err)
				}
			}
		})
	}
}

func TestPublishRejectsStaleVersions(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo, nil)
	pub.publish(t, 3, paramsFor(3, 4))
	for _, v := range []int64{3, 2, -1} {
		var err error
		pub.do(t, func(p *paramstream.Publisher) { err = p.Publish(ctxT(t), v, nil) })
		if !errors.Is(err, paramstream.ErrStaleVersion) {
			t.Errorf("Publish(%d) after 3: %v, want ErrStaleVersion", v, err)
		}
	}
}

func TestRecordContents(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo, func(o *paramstream.PublisherOptions) { o.Policy = "blue" })
	key := testTrial.Params("blue")
	if _, err := repo.Get(ctxT(t), key); err == nil {
		t.Error("record written before the first Publish")
	}
	pub.publish(t, 7, paramsFor(7, 4))
	v, err := repo.Get(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := paramstream.ParseRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	want := paramstream.Record{Version: 7, Fetch: pub.pub.FetchAddr(), Notify: pub.pub.NotifyAddr(), Epoch: pub.pub.Epoch()}
	if rec != want {
		t.Errorf("record %+v, want %+v", rec, want)
	}
	pub.close()
	if _, err := repo.Get(ctxT(t), key); err == nil {
		t.Error("record still there after Close")
	}
}

func TestClosed(t *testing.T) {
	repo := workertest.Repo(t)
	pub, err := paramstream.NewPublisher(ctxT(t), paramstream.PublisherOptions{Repo: repo, Trial: testTrial})
	if err != nil {
		t.Fatal(err)
	}
	s := newSubscriber(t, repo, nil)
	for _, c := range []interface{ Close() error }{pub, s, pub, s} {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if err := pub.Publish(ctxT(t), 1, nil); !errors.Is(err, paramstream.ErrClosed) {
		t.Errorf("Publish after Close: %v", err)
	}
	if _, err := pub.Poll(1); !errors.Is(err, paramstream.ErrClosed) {
		t.Errorf("Publisher.Poll after Close: %v", err)
	}
	if _, err := s.Poll(ctxT(t)); !errors.Is(err, paramstream.ErrClosed) {
		t.Errorf("Subscriber.Poll after Close: %v", err)
	}
	if _, err := s.Fetch(ctxT(t)); !errors.Is(err, paramstream.ErrClosed) {
		t.Errorf("Fetch after Close: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	repo := workertest.Repo(t)
	if _, err := paramstream.NewPublisher(ctxT(t), paramstream.PublisherOptions{}); err == nil {
		t.Error("NewPublisher without a Repo succeeded")
	}
	if _, err := paramstream.NewPublisher(ctxT(t), paramstream.PublisherOptions{Repo: repo, TTL: -1}); err == nil {
		t.Error("NewPublisher with a negative TTL succeeded")
	}
	if _, err := paramstream.NewSubscriber(ctxT(t), paramstream.SubscriberOptions{}); err == nil {
		t.Error("NewSubscriber without a Repo succeeded")
	}
	if _, err := paramstream.NewSubscriber(ctxT(t), paramstream.SubscriberOptions{Repo: repo, FetchTimeout: -1}); err == nil {
		t.Error("NewSubscriber with a negative FetchTimeout succeeded")
	}
}
