package stream_test

import (
	"reflect"
	"testing"

	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/stream"
)

// TestDiscoveryThroughEtcd runs both streams on a real (embedded) etcd:
// leases, prefix Find and Watch as deployed.
func TestDiscoveryThroughEtcd(t *testing.T) {
	repo := etcdtest.Repo(t)

	// Samples: the producer starts first and finds the consumer through
	// the watch.
	p := newProducer(t, repo, 0)
	c := newConsumer(t, repo, 0, 0)
	b := makeBatch(t, "actor/0", 1, 16, 3)
	postRetrying(t, p, b)
	if got := collect(t, 1, c)[0][0]; !reflect.DeepEqual(got, b) {
		t.Errorf("batch changed on the way")
	}

	// Inference: the client starts first; a server registers; it is
	// closed and a replacement takes over.
	client := newClient(t, repo, 0)
	clients := []stream.InferenceClient{client}
	a := newServer(t, repo, 0, nil)
	drive(t, clients, []*server{a}, post(t, client, 1, 2, 3))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	bsrv := newServer(t, repo, 1, nil)
	drive(t, clients, []*server{bsrv}, post(t, client, 4, 5))
	if w := client.Warning(); w != "" {
		t.Errorf("Warning = %q", w)
	}
}
