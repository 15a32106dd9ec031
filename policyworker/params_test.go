package policyworker_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// publisher runs a paramstream.Publisher on a goroutine of its own, as a
// trainer's loop would: it answers fetches and publishes on request.
type publisher struct {
	pub     *paramstream.Publisher
	publish chan publication
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type publication struct {
	version int64
	data    []float32
	err     chan error
}

func startPublisher(t *testing.T, repo nameresolve.Repository) *publisher {
	t.Helper()
	pub, err := paramstream.NewPublisher(ctxT(t), paramstream.PublisherOptions{
		Repo: repo, Trial: testTrial, TTL: time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	p := &publisher{pub: pub, publish: make(chan publication), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(t)
	t.Cleanup(p.close)
	return p
}

func (p *publisher) run(t *testing.T) {
	defer close(p.done)
	defer p.pub.Close()
	poller := zmq.NewPoller()
	poller.Add(p.pub.Socket(), zmq.POLLIN)
	for {
		select {
		case pb := <-p.publish:
			pb.err <- p.pub.Publish(ctxT(t), pb.version, pb.data)
			continue
		case <-p.stop:
			return
		default:
		}
		if _, err := p.pub.Poll(64); err != nil {
			t.Errorf("publisher Poll: %v", err)
			return
		}
		if _, err := poller.Poll(2 * time.Millisecond); err != nil {
			t.Errorf("publisher wait: %v", err)
			return
		}
	}
}

func (p *publisher) put(t *testing.T, version int64, data []float32) {
	t.Helper()
	errc := make(chan error, 1)
	p.publish <- publication{version, data, errc}
	if err := <-errc; err != nil {
		t.Fatalf("Publish(%d): %v", version, err)
	}
}

func (p *publisher) close() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

func randomParams(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(0.3 * rng.NormFloat64())
	}
	return out
}

// answersWith round-trips obs until the answers carry version, then
// checks them against a local policy with params.
func answersWith(t *testing.T, f *fixture, version int64, params []float32) {
	t.Helper()
	c := newClient(t, f.repo, 4, 5*time.Second)
	w := newWaiter(c)
	obs := cartPoleObs(uint64(version), 16)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := mustRoundTrip(t, c, w, obs)
		if res[0].Version == version {
			checkAnswers(t, res, localAnswers(t, cartPoleConfig(t, 3), version, params, obs))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers still carry version %d, want %d (stats %v)", res[0].Version, version, f.stats(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFollowsPublishedParams: the worker's answers follow the versions a
// publisher publishes, and match a local policy with those parameters; an
// explicit load_params holds until the next published version.
func TestFollowsPublishedParams(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo)
	f := startWorker(t, repo, 0, 10*time.Millisecond, testLogger(t))
	f.configure(t, map[string]any{
		"env": env.CartPoleName, "seed": 3, "deterministic": true, "param_cache_dir": t.TempDir(),
	})
	f.do(t, member.CmdStart, nil, nil)
	n := numParams(t, cartPoleConfig(t, 3))

	for v := int64(1); v <= 2; v++ {
		params := randomParams(n, uint64(v))
		pub.put(t, v, params)
		answersWith(t, f, v, params)
	}
	st := f.stats(t)
	if pv, nf := num(t, st, "param_version"), num(t, st, "param_fetches_network"); pv != 2 || nf != 2 {
		t.Errorf("param_version %v, param_fetches_network %v; want 2 and 2", pv, nf)
	}

	explicit := randomParams(n, 50)
	f.do(t, policyworker.CmdLoadParams, policyworker.LoadParamsArgs{Version: 50, Params: flat(explicit)}, nil)
	answersWith(t, f, 50, explicit)
	p3 := randomParams(n, 3)
	pub.put(t, 3, p3)
	answersWith(t, f, 3, p3)
}

// TestStartsFromNewestPublished: a policy worker configured after
// versions were published (a late joiner, or a restarted one) has the
// newest at once; a second one on the same node reads it from the node
// cache instead of the network.
func TestStartsFromNewestPublished(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo)
	n := numParams(t, cartPoleConfig(t, 3))
	for v := int64(1); v <= 4; v++ {
		pub.put(t, v, randomParams(n, uint64(v)))
	}
	cacheDir := t.TempDir()
	for i, want := range []struct{ network, hits float64 }{{1, 0}, {0, 1}} {
		f := startWorker(t, repo, i, 10*time.Millisecond, testLogger(t))
		f.configure(t, map[string]any{
			"env": env.CartPoleName, "seed": 3, "deterministic": true, "param_cache_dir": cacheDir,
		})
		var got policyworker.Params
		f.do(t, policyworker.CmdGetParams, nil, &got)
		if got.Version != 4 || !slices.Equal(got.Params.Data, randomParams(n, 4)) {
			t.Fatalf("worker %d: get_params after configure gives version %d, want the published version 4", i, got.Version)
		}
		st := f.stats(t)
		if nf, ch := num(t, st, "param_fetches_network"), num(t, st, "param_cache_hits"); nf != want.network || ch != want.hits {
			t.Errorf("worker %d: %v network fetches, %v cache hits; want %v and %v", i, nf, ch, want.network, want.hits)
		}
	}
}

// TestFollowParamsOff: with follow_params false nothing published is
// loaded.
func TestFollowParamsOff(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo)
	n := numParams(t, cartPoleConfig(t, 3))
	pub.put(t, 1, randomParams(n, 1))
	f := startWorker(t, repo, 0, 10*time.Millisecond, testLogger(t))
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 3, "follow_params": false})
	f.do(t, member.CmdStart, nil, nil)
	pub.put(t, 2, randomParams(n, 2))
	time.Sleep(100 * time.Millisecond)
	st := f.stats(t)
	if v := num(t, st, "version"); v != 0 {
		t.Errorf("version %v with follow_params false, want 0", v)
	}
	if _, ok := st["param_version"]; ok {
		t.Errorf("stats report param_version without a subscriber: %v", st)
	}
}

// TestPublishedParamsThatDoNotFit: a published vector of the wrong size
// (a trainer configured differently) is not loaded; the worker says so
// and keeps serving.
func TestPublishedParamsThatDoNotFit(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo)
	f := startWorker(t, repo, 0, 10*time.Millisecond, testLogger(t))
	f.configure(t, map[string]any{"env": env.CartPoleName, "seed": 3, "deterministic": true, "param_cache_dir": t.TempDir()})
	f.do(t, member.CmdStart, nil, nil)
	pub.put(t, 1, randomParams(10, 1))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var s member.Status
		f.do(t, member.CmdStatus, nil, &s)
		if strings.Contains(s.Warning, "version 1 not loaded") {
			if s.State != member.StateRunning {
				t.Errorf("state %s, want %s", s.State, member.StateRunning)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning about the misfit parameters; status %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	answersWith(t, f, 0, nil)
}
