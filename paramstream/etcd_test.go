package paramstream_test

import (
	"time"

	"errors"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/paramstream"
)

// TestFollowThroughEtcd runs the record's life on a real (embedded) etcd:
// a leased record, a watch on its key, its removal on Close, and a
// replacement publisher.
func TestFollowThroughEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	const n = 256
	repo := etcdtest.Repo(t)
	a := startPublisher(t, repo, nil)
	f := newFollower(newSubscriber(t, repo, nil), n)
	for v := int64(1); v <= 2; v++ {
		a.publish(t, v, paramsFor(v, n))
		f.mustUntil(t, v)
	}
	a.close()
	eventually.True(t, 10*time.Second, "the record's removal through the watch", func() bool {
		if p, err := f.s.Poll(ctxT(t)); p != nil || err != nil {
			t.Fatalf("Poll = %v, %v", p, err)
		}
		_, err := f.s.Fetch(ctxT(t))
		return errors.Is(err, paramstream.ErrNoPublisher)
	})
	b := startPublisher(t, repo, nil)
	b.publish(t, 3, paramsFor(3, n))
	f.mustUntil(t, 3)
}
