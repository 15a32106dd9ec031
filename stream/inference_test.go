package stream_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

func TestRemoteInferenceRoundTrip(t *testing.T) {
	cases := []struct {
		name    string
		flushes []int // observations posted before each flush
	}{
		{"one observation", []int{1}},
		{"one batch", []int{32}},
		{"several flushes", []int{5, 1, 17, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := workertest.Repo(t)
			srv := newServer(t, repo, 0, nil)
			c := newClient(t, repo, 0)
			next := 0
			for _, n := range tc.flushes {
				ps := post(t, c, seq(next, n)...)
				next += n
				drive(t, []stream.InferenceClient{c}, []*server{srv}, ps)
			}
			if w := c.Warning(); w != "" {
				t.Errorf("Warning = %q, want none", w)
			}
			st := c.Stats()
			if st.Posted != int64(next) || st.Replies != int64(next) || st.Failed != 0 || st.Malformed != 0 {
				t.Errorf("client stats %+v", st)
			}
			// A round trip is measured from the turn (Poll or Flush) before the posts.
			if st.RoundTrip <= 0 || st.RoundTrip > 10*time.Second {
				t.Errorf("round trip %v after %d replies", st.RoundTrip, st.Replies)
			}
			if ss := srv.Stats(); ss.Rows != int64(next) || ss.Malformed != 0 || ss.Replies != ss.Messages {
				t.Errorf("server stats %+v", ss)
			}
		})
	}
}

func TestInferenceServerBatchesManyClients(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	const nClients, perClient = 4, 5
	var clients []stream.InferenceClient
	var ps []pending
	for i := range nClients {
		c := newClient(t, repo, 0)
		clients = append(clients, c)
		ps = append(ps, post(t, c, seq(100*i, perClient)...)...)
	}
	// Send everything before the server looks, so one Poll finds messages
	// from several clients.
	for _, c := range clients {
		c := c.(*stream.RemoteInferenceClient)
		eventually.True(t, 10*time.Second, "request sent", func() bool {
			if err := c.Flush(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			return c.Stats().Messages == 1
		})
	}
	if _, err := srv.poller.Poll(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the other messages land
	drive(t, clients, []*server{srv}, ps)
	if srv.reqs[0] < 2 {
		t.Errorf("first Poll took %d request(s) (rows per poll %v), want rows from several clients", srv.reqs[0], srv.polls)
	}
	if got := srv.Stats().Rows; got != nClients*perClient {
		t.Errorf("server rows %d, want %d", got, nClients*perClient)
	}
}

func TestInferenceSpreadsOverServers(t *testing.T) {
	repo := workertest.Repo(t)
	servers := []*server{newServer(t, repo, 0, nil), newServer(t, repo, 1, nil)}
	c := newClient(t, repo, 0)
	clients := []stream.InferenceClient{c}
	// One observation per flush; DEALER deals the messages round-robin to
	// the connected servers. Go on until both have been used (the second
	// connection may come up a moment after the first).
	for i := 0; ; i++ {
		drive(t, clients, servers, post(t, c, float32(i)))
		if servers[0].Stats().Messages > 0 && servers[1].Stats().Messages > 0 && i >= 20 {
			break
		}
		if i > 2000 {
			t.Fatalf("messages per server: %d, %d", servers[0].Stats().Messages, servers[1].Stats().Messages)
		}
	}
	a, b := servers[0].Stats().Messages, servers[1].Stats().Messages
	t.Logf("messages per server: %d, %d", a, b)
	if min(a, b)*4 < max(a, b) {
		t.Errorf("flushes badly spread: %d vs %d", a, b)
	}
}

func TestInferenceServerMaxRows(t *testing.T) {
	cases := []struct {
		sizes   []int // observations per request
		maxRows int
		want    []int // rows per Poll
	}{
		{[]int{3, 3, 3}, 7, []int{6, 3}},
		{[]int{3, 3, 3}, 6, []int{6, 3}},
		{[]int{3, 3, 3}, 9, []int{9}},
		{[]int{3, 3, 3}, 2, []int{3, 3, 3}}, // a request larger than maxRows comes alone
		{[]int{1, 2, 3, 1}, 3, []int{3, 3, 1}},
		{[]int{5}, 0, []int{5}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v/max=%d", tc.sizes, tc.maxRows), func(t *testing.T) {
			repo := workertest.Repo(t)
			srv := newServer(t, repo, 0, nil)
			c := newClient(t, repo, 0)
			var ps []pending
			next := 0
			for i, n := range tc.sizes {
				ps = append(ps, post(t, c, seq(next, n)...)...)
				next += n
				eventually.True(t, 10*time.Second, "request sent", func() bool {
					if err := c.Flush(ctxT(t)); err != nil {
						t.Fatal(err)
					}
					return c.Stats().Messages == int64(i+1)
				})
			}
			// Wait for the first message, then give the rest time to land.
			eventually.True(t, 10*time.Second, "first request", func() bool {
				if ready, _ := srv.InputReady(); ready {
					return true
				}
				n, err := srv.poller.Poll(time.Millisecond)
				return err == nil && len(n) > 0
			})
			time.Sleep(100 * time.Millisecond)
			for srv.serve(t, tc.maxRows) > 0 {
			}
			if fmt.Sprint(srv.polls) != fmt.Sprint(tc.want) {
				t.Fatalf("rows per Poll %v, want %v", srv.polls, tc.want)
			}
			drive(t, []stream.InferenceClient{c}, []*server{srv}, ps)
		})
	}
}

func TestInferenceFailover(t *testing.T) {
	const timeout = 300 * time.Millisecond
	repo := workertest.Repo(t)
	a := newServer(t, repo, 0, nil)
	c := newClient(t, repo, timeout)
	clients := []stream.InferenceClient{c}
	drive(t, clients, []*server{a}, post(t, c, 1, 2))

	// Requests in flight when the server goes away fail after the timeout.
	lost := post(t, c, 3, 4, 5)
	eventually.True(t, 10*time.Second, "request sent", func() bool {
		if err := c.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return c.Stats().Messages == 2
	})
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Posted while no server is registered: stays queued, then fails too.
	lost = append(lost, post(t, c, 6)...)
	start := time.Now()
	eventually.True(t, 10*time.Second, "requests failed", func() bool {
		if err := c.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		for _, p := range lost {
			if !c.Ready(p.id) {
				return false
			}
		}
		return true
	})
	if el := time.Since(start); el > 5*timeout {
		t.Errorf("failures took %v with a %v timeout", el, timeout)
	}
	for _, p := range lost {
		if _, err := c.Consume(p.id); !errors.Is(err, stream.ErrInferenceFailed) {
			t.Fatalf("Consume(%d) = %v, want ErrInferenceFailed", p.id, err)
		}
	}
	if st := c.Stats(); st.Failed != int64(len(lost)) {
		t.Errorf("Failed = %d, want %d", st.Failed, len(lost))
	}
	w := c.Warning()
	if !strings.Contains(w, "no policy worker") || !strings.Contains(w, "timed out") {
		t.Errorf("Warning = %q, want it to say no policy worker and timed out", w)
	}

	// A new server registers; the actor posts again and is answered.
	b := newServer(t, repo, 1, nil)
	drive(t, clients, []*server{b}, post(t, c, 3, 4, 5, 6))
	if w := c.Warning(); w != "" {
		t.Errorf("Warning after recovery = %q, want none", w)
	}
	if _, err := c.Consume(lost[0].id); !errors.Is(err, stream.ErrUnknownRequest) {
		t.Errorf("second Consume = %v, want ErrUnknownRequest", err)
	}
}

func TestInferenceQueuedUntilServerRegisters(t *testing.T) {
	repo := workertest.Repo(t)
	c := newClient(t, repo, 0)
	ps := post(t, c, 1, 2, 3)
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if w := c.Warning(); !strings.Contains(w, `no policy worker for policy "default"`) {
		t.Errorf("Warning = %q", w)
	}
	srv := newServer(t, repo, 0, nil)
	drive(t, []stream.InferenceClient{c}, []*server{srv}, ps)
	if st := c.Stats(); st.Messages != 1 {
		t.Errorf("messages %d, want the 3 queued requests in 1", st.Messages)
	}
	if w := c.Warning(); w != "" {
		t.Errorf("Warning = %q, want none", w)
	}
}

func TestInferenceLateReplyDropped(t *testing.T) {
	const timeout = 200 * time.Millisecond
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	c := newClient(t, repo, timeout)
	ps := post(t, c, 1)
	eventually.True(t, 10*time.Second, "request sent", func() bool {
		if err := c.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return c.Stats().Messages == 1
	})
	time.Sleep(timeout + 50*time.Millisecond)
	if err := c.Poll(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Consume(ps[0].id); !errors.Is(err, stream.ErrInferenceFailed) {
		t.Fatalf("Consume = %v, want ErrInferenceFailed", err)
	}
	eventually.True(t, 10*time.Second, "late request served", func() bool { return srv.serve(t, 16) > 0 })
	eventually.True(t, 10*time.Second, "late reply dropped", func() bool {
		if err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		return c.Stats().Late == 1
	})
	if c.Ready(ps[0].id) {
		t.Error("expired request became ready again")
	}
}

// rawRequest encodes a request map by hand, for malformed variants.
func rawRequest(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInferenceServerDropsMalformed(t *testing.T) {
	ids := func(v ...int64) api.Tensor[int64] { return api.Tensor[int64]{Shape: []int{len(v)}, Data: v} }
	obs := func(n, d int) api.Tensor[float32] { return api.NewTensor[float32](n, d) }
	good := rawRequest(t, map[string]any{"ids": ids(41, 42), "obs": api.Tensor[float32]{Shape: []int{2, obsDim}, Data: append(obsFor(41), obsFor(42)...)}})
	hugeBin := []byte{0x82, 0xa3, 'i', 'd', 's', 0x83, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa5, 'i', 'n', 't', '6', '4',
		0xa5, 's', 'h', 'a', 'p', 'e', 0x91, 0xce, 0x10, 0, 0, 0, 0xa4, 'd', 'a', 't', 'a', 0xc6, 0x40, 0, 0, 0}
	cases := []struct {
		name   string
		frames [][]byte
	}{
		{"not msgpack", [][]byte{{0xc1, 0xc1}}},
		{"not a map", [][]byte{rawRequest(t, map[string]any{"a": 1})[1:]}},
		{"trailing bytes", [][]byte{append(append([]byte{}, good...), 0)}},
		{"wrong dtype", [][]byte{rawRequest(t, map[string]any{"ids": ids(1), "obs": api.NewTensor[float64](1, obsDim)})}},
		{"rows mismatch", [][]byte{rawRequest(t, map[string]any{"ids": ids(1, 2), "obs": obs(3, obsDim)})}},
		{"no rows", [][]byte{rawRequest(t, map[string]any{"ids": ids(), "obs": obs(0, obsDim)})}},
		{"missing obs", [][]byte{rawRequest(t, map[string]any{"ids": ids(1)})}},
		{"extra key", [][]byte{rawRequest(t, map[string]any{"ids": ids(1), "obs": obs(1, obsDim), "x": 1})}},
		{"ids as array", [][]byte{rawRequest(t, map[string]any{"ids": []int64{1}, "obs": obs(1, obsDim)})}},
		{"hostile length", [][]byte{hugeBin}},
		{"two frames", [][]byte{good, good}},
		{"empty frame", [][]byte{{}}},
	}
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	dealer := rawSocket(t, zmq.DEALER, srv.Addr())
	for _, tc := range cases {
		var parts []any
		for _, f := range tc.frames {
			parts = append(parts, f)
		}
		if _, err := dealer.SendMessage(parts...); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
	}
	if _, err := dealer.SendBytes(good, 0); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "good request after the bad ones", func() bool {
		srv.serve(t, 64)
		return srv.Stats().Rows == 2
	})
	if got := srv.Stats().Malformed; got != int64(len(cases)) {
		t.Errorf("Malformed = %d, want %d", got, len(cases))
	}
	dealer.SetRcvtimeo(5 * time.Second)
	reply, err := dealer.RecvBytes(0)
	if err != nil {
		t.Fatalf("no reply to the good request: %v", err)
	}
	var r struct {
		IDs       api.Tensor[int64] `msgpack:"ids"`
		Inference api.Inference     `msgpack:"inference"`
	}
	if err := msgpack.Unmarshal(reply, &r); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.IDs.Data, r.Inference.Actions.Data) != "[41 42] [41 42]" {
		t.Errorf("reply ids %v actions %v", r.IDs.Data, r.Inference.Actions.Data)
	}
}

func TestInferenceServerTakesObsDimFromFirstRequest(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, func(o *stream.InferenceServerOptions) { o.ObsDim = 0 })
	c := newClient(t, repo, 0)
	drive(t, []stream.InferenceClient{c}, []*server{srv}, post(t, c, 1, 2))
	dealer := rawSocket(t, zmq.DEALER, srv.Addr())
	bad := rawRequest(t, map[string]any{
		"ids": api.Tensor[int64]{Shape: []int{1}, Data: []int64{1}},
		"obs": api.NewTensor[float32](1, obsDim+2),
	})
	if _, err := dealer.SendBytes(bad, 0); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "bad dim refused", func() bool {
		srv.serve(t, 64)
		return srv.Stats().Refused == 1
	})
	dealer.SetRcvtimeo(5 * time.Second)
	reply, err := dealer.RecvBytes(0)
	if err != nil {
		t.Fatalf("no refusal: %v", err)
	}
	var r struct {
		IDs   api.Tensor[int64] `msgpack:"ids"`
		Error string            `msgpack:"error"`
	}
	if err := msgpack.Unmarshal(reply, &r); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("observations have %d values, policy %q wants %d", obsDim+2, stream.DefaultPolicy, obsDim); fmt.Sprint(r.IDs.Data) != "[1]" || !strings.Contains(r.Error, want) {
		t.Errorf("refusal ids %v error %q, want [1] and %q", r.IDs.Data, r.Error, want)
	}
}

// A client whose observations do not fit the policy worker's is told so:
// its requests fail at once with the worker's reason, in process, over
// shared memory and over ZMQ, and a client that fits is served as before.
func TestInferenceRefusesWrongObservationLength(t *testing.T) {
	for _, tc := range []struct{ name, shm, proc string }{{"in process", "", ""}, {"shared memory", "", "0"}, {"zmq", "0", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(shm.Env, tc.shm)
			t.Setenv(stream.InProcessEnv, tc.proc)
			repo := workertest.Repo(t)
			srv := newServer(t, repo, 0, nil)
			good := newClient(t, repo, 0)
			// A timeout longer than the test: a refusal, not an expiry, ends it.
			bad, err := stream.NewRemoteInferenceClient(ctxT(t), stream.RemoteInferenceOptions{
				Repo: repo, Trial: testTrial, ObsDim: obsDim + 3, Timeout: time.Hour, Logger: testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bad.Close() })
			var ids []stream.ReqID
			for range 3 {
				id, err := bad.Post(make([]float32, obsDim+3))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			eventually.True(t, 10*time.Second, "requests refused", func() bool {
				if err := bad.Flush(ctxT(t)); err != nil {
					t.Fatal(err)
				}
				srv.serve(t, 64)
				if err := bad.Poll(); err != nil {
					t.Fatal(err)
				}
				return bad.Ready(ids[2])
			})
			want := fmt.Sprintf("observations have %d values, policy %q wants %d", obsDim+3, stream.DefaultPolicy, obsDim)
			for _, id := range ids {
				_, err := bad.Consume(id)
				if !errors.Is(err, stream.ErrInferenceRefused) || errors.Is(err, stream.ErrInferenceFailed) || !strings.Contains(err.Error(), want) {
					t.Errorf("Consume(%d) = %v, want ErrInferenceRefused saying %q", id, err, want)
				}
			}
			if st := bad.Stats(); st.Refused != 3 || st.Failed != 0 {
				t.Errorf("client stats %+v, want 3 refused, 0 failed", st)
			}
			if w := bad.Warning(); !strings.Contains(w, want) {
				t.Errorf("Warning() = %q, want it to say %q", w, want)
			}
			if st := srv.Stats(); st.Refused != 1 || st.Malformed != 0 {
				t.Errorf("server stats %+v, want 1 refused request, 0 malformed", st)
			}
			drive(t, []stream.InferenceClient{good}, []*server{srv}, post(t, good, 7, 8))
		})
	}
}

func TestRespondRejectsMisalignedInference(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	c := newClient(t, repo, 0)
	post(t, c, 1, 2)
	var b stream.InferenceBatch
	eventually.True(t, 10*time.Second, "request", func() bool {
		if err := c.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		n, err := srv.Poll(16, &b)
		if err != nil {
			t.Fatal(err)
		}
		return n == 2
	})
	cases := []struct {
		name string
		out  api.Inference
	}{
		{"no actions", api.Inference{}},
		{"too few rows", api.Inference{Actions: api.NewTensor[int32](1)}},
		{"both kinds", api.Inference{Actions: api.NewTensor[int32](2), ContActions: api.NewTensor[float32](2, 1)}},
		{"short values", api.Inference{Actions: api.NewTensor[int32](2), Values: api.NewTensor[float32](1)}},
	}
	for _, tc := range cases {
		if err := srv.Respond(&b, &tc.out); err == nil {
			t.Errorf("%s: Respond succeeded", tc.name)
		}
	}
}

func TestContinuousActions(t *testing.T) { sameNode(t, testContinuousActions) }

func testContinuousActions(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	c := newClient(t, repo, 0)
	ps := post(t, c, 1, 2, 3)
	var b stream.InferenceBatch
	eventually.True(t, 10*time.Second, "served", func() bool {
		if err := c.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		n, err := srv.Poll(16, &b)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return false
		}
		out := api.Inference{ContActions: api.NewTensor[float32](n, 2), Version: 3}
		for i := range n {
			x := b.Obs.Row(i)[0]
			copy(out.ContActions.Row(i), []float32{x, -x})
		}
		if err := srv.Respond(&b, &out); err != nil {
			t.Fatal(err)
		}
		return true
	})
	for _, p := range ps {
		eventually.True(t, 10*time.Second, "reply", func() bool { c.Poll(); return c.Ready(p.id) })
		r, err := c.Consume(p.id)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r.ContAction) != fmt.Sprint([]float32{p.x, -p.x}) || r.Version != 3 {
			t.Errorf("x=%v: got %+v", p.x, r)
		}
	}
}

func TestPostChecksObservationLength(t *testing.T) {
	c := newClient(t, workertest.Repo(t), 0)
	if _, err := c.Post(make([]float32, obsDim+1)); err == nil {
		t.Error("Post accepted an observation of the wrong length")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(obsFor(1)); !errors.Is(err, stream.ErrClosed) {
		t.Errorf("Post after Close = %v, want ErrClosed", err)
	}
}

// linear is a small real api.Policy: action = argmax(W obs), value = sum(obs).
type linear struct {
	w       [][]float32 // [actions][obs_dim]
	version int64
	fail    error
}

func (p *linear) Infer(obs api.Tensor[float32], out *api.Inference) error {
	if p.fail != nil {
		return p.fail
	}
	n := obs.Shape[0]
	if err := out.Actions.Resize(n); err != nil {
		return err
	}
	if err := out.Values.Resize(n); err != nil {
		return err
	}
	out.LogProbs, out.ContActions = api.Tensor[float32]{}, api.Tensor[float32]{}
	for i := range n {
		best, bestScore := 0, float32(0)
		var sum float32
		for a, w := range p.w {
			var s float32
			for j, x := range obs.Row(i) {
				s += w[j] * x
			}
			if a == 0 || s > bestScore {
				best, bestScore = a, s
			}
		}
		for _, x := range obs.Row(i) {
			sum += x
		}
		out.Actions.Data[i] = int32(best)
		out.Values.Data[i] = sum
	}
	out.Version = p.version
	return nil
}

func (p *linear) Version() int64 { return p.version }

func TestInlineInferenceClient(t *testing.T) {
	p := &linear{w: [][]float32{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}}, version: 4}
	c := stream.NewInlineInferenceClient(p, 3)
	if c.Socket() != nil {
		t.Error("inline Socket is not nil")
	}
	obs := [][]float32{{1, 0, 0}, {0, 2, 0}, {0, 0, 3}, {5, 1, 1}}
	want := []int32{0, 1, 2, 0}
	var ids []stream.ReqID
	for _, o := range obs {
		id, err := c.Post(o)
		if err != nil {
			t.Fatal(err)
		}
		if c.Ready(id) {
			t.Fatal("ready before Flush")
		}
		ids = append(ids, id)
	}
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if !c.Ready(id) {
			t.Fatalf("request %d not ready after Flush", id)
		}
		r, err := c.Consume(id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Action != want[i] || r.Value != obs[i][0]+obs[i][1]+obs[i][2] || r.Version != 4 {
			t.Errorf("obs %v: got %+v", obs[i], r)
		}
	}

	p.fail = errors.New("weights on fire")
	id, _ := c.Post(obs[0])
	if err := c.Flush(ctxT(t)); err == nil {
		t.Error("Flush succeeded with a failing policy")
	}
	_, err := c.Consume(id)
	if !errors.Is(err, stream.ErrInferenceFailed) || !strings.Contains(err.Error(), "weights on fire") {
		t.Errorf("Consume = %v, want ErrInferenceFailed with the cause", err)
	}
	if _, err := c.Post([]float32{1}); err == nil {
		t.Error("Post accepted an observation of the wrong length")
	}
}
