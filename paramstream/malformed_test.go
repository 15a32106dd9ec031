package paramstream_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/paramstream"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newSocket(t *testing.T, typ zmq.Type) *zmq.Socket {
	t.Helper()
	s, err := zmq.NewSocket(typ)
	if err != nil {
		t.Fatal(err)
	}
	s.SetLinger(0)
	t.Cleanup(func() { s.Close() })
	return s
}

// recvTimeout receives one message or fails the test after 5 s.
func recvTimeout(t *testing.T, s *zmq.Socket) [][]byte {
	t.Helper()
	p := zmq.NewPoller()
	p.Add(s, zmq.POLLIN)
	if polled, err := p.Poll(5 * time.Second); err != nil || len(polled) == 0 {
		t.Fatalf("no message within 5 s (%v)", err)
	}
	msg, err := s.RecvMessageBytes(0)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestPublisherSurvivesMalformedRequests sends garbage and questionable
// requests; the publisher counts, refuses or drops them and goes on
// serving.
func TestPublisherSurvivesMalformedRequests(t *testing.T) {
	repo := workertest.Repo(t)
	pub := startPublisher(t, repo, nil)
	pub.publish(t, 2, paramsFor(2, 16))
	client := newSocket(t, zmq.DEALER)
	if err := client.Connect("tcp://" + pub.pub.FetchAddr()); err != nil {
		t.Fatal(err)
	}
	dropped := [][][]byte{
		{[]byte("not msgpack")},
		{mustMarshal(t, map[string]any{"policy": "default", "min_version": 1}), []byte("extra frame")},
		{mustMarshal(t, map[string]any{"policy": "default", "min_version": 1, "surprise": true})},
		{mustMarshal(t, map[string]any{"min_version": 1})},
		{append(mustMarshal(t, map[string]any{"policy": "default", "min_version": 1}), 0xc0)}, // trailing bytes
	}
	for _, m := range dropped {
		if _, err := client.SendMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	refused := []struct {
		req  map[string]any
		code string
	}{
		{map[string]any{"policy": "other", "min_version": 0}, paramstream.CodeUnknownPolicy},
		{map[string]any{"policy": "default", "min_version": 3}, paramstream.CodeNoParams},
	}
	for _, r := range refused {
		if _, err := client.SendBytes(mustMarshal(t, r.req), 0); err != nil {
			t.Fatal(err)
		}
		var reply map[string]any
		if err := msgpack.Unmarshal(recvTimeout(t, client)[0], &reply); err != nil {
			t.Fatal(err)
		}
		if reply["error"] != r.code {
			t.Errorf("request %v: reply %v, want error %q", r.req, reply, r.code)
		}
	}
	// A REQ socket's envelope works too, and the data comes back.
	req := newSocket(t, zmq.REQ)
	if err := req.Connect("tcp://" + pub.pub.FetchAddr()); err != nil {
		t.Fatal(err)
	}
	if _, err := req.SendBytes(mustMarshal(t, map[string]any{"policy": "default", "min_version": 2}), 0); err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Version int64               `msgpack:"version"`
		Data    api.Tensor[float32] `msgpack:"data"`
	}
	if err := msgpack.Unmarshal(recvTimeout(t, req)[0], &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Version != 2 || len(reply.Data.Data) != 16 || reply.Data.Data[1] != paramsFor(2, 16)[1] {
		t.Errorf("REQ fetch: version %d, %d values", reply.Version, len(reply.Data.Data))
	}
	st := pub.stats(t)
	if st.Malformed != int64(len(dropped)) || st.Refused != 2 || st.Served != 1 {
		t.Errorf("stats %+v, want %d malformed, 2 refused, 1 served", st, len(dropped))
	}
}

// fakePublisher is a hand-driven publisher: a record, a PUB and a ROUTER
// whose replies the test writes.
type fakePublisher struct {
	pub, router *zmq.Socket
	rec         paramstream.Record
}

func newFakePublisher(t *testing.T, repo nameresolve.Repository, version int64) *fakePublisher {
	t.Helper()
	f := &fakePublisher{pub: newSocket(t, zmq.PUB), router: newSocket(t, zmq.ROUTER)}
	for _, s := range []*zmq.Socket{f.pub, f.router} {
		if err := s.Bind("tcp://127.0.0.1:*"); err != nil {
			t.Fatal(err)
		}
	}
	addr := func(s *zmq.Socket) string {
		ep, _ := s.GetLastEndpoint()
		return strings.TrimPrefix(ep, "tcp://")
	}
	f.rec = paramstream.Record{Version: version, Fetch: addr(f.router), Notify: addr(f.pub), Epoch: 42}
	setRecord(t, repo, f.rec)
	return f
}

func setRecord(t *testing.T, repo nameresolve.Repository, rec paramstream.Record) {
	t.Helper()
	value, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Add(ctxT(t), testTrial.Params(paramstream.DefaultPolicy), string(value), nameresolve.AddOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
}

// TestSubscriberSurvivesMalformedMessages: notifications, replies and
// records that are garbage, stale or for someone else are dropped and
// counted, and a good reply afterwards is used.
func TestSubscriberSurvivesMalformedMessages(t *testing.T) {
	const n = 8
	repo := workertest.Repo(t)
	key := testTrial.Params(paramstream.DefaultPolicy)
	// A record nobody can parse is ignored.
	if err := repo.Add(ctxT(t), key, "{not json", nameresolve.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	s := newSubscriber(t, repo, func(o *paramstream.SubscriberOptions) { o.NoCache = true })
	if _, err := s.Fetch(ctxT(t)); !errors.Is(err, paramstream.ErrNoPublisher) {
		t.Fatalf("Fetch with a malformed record: %v, want ErrNoPublisher", err)
	}

	fake := newFakePublisher(t, repo, 0)
	reply := func(fields map[string]any) []byte { return mustMarshal(t, fields) }
	good := map[string]any{"policy": "default", "version": int64(5), "epoch": uint64(42)}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	flat := api.Tensor[float32]{Shape: []int{n}, Data: paramsFor(5, n)}
	malformedReplies := [][]byte{
		[]byte("garbage"),
		reply(with(map[string]any{"data": api.Tensor[float32]{Shape: []int{2, n / 2}, Data: paramsFor(5, n)}})), // not flat
		reply(with(map[string]any{"policy": "other", "data": flat})),
		reply(with(map[string]any{"data": flat, "unexpected": 1})),
		reply(with(nil)), // neither data nor error
	}
	staleReplies := [][]byte{
		reply(with(map[string]any{"epoch": uint64(41), "data": flat})),                                                        // another publisher
		reply(with(map[string]any{"version": int64(4), "data": api.Tensor[float32]{Shape: []int{n}, Data: paramsFor(4, n)}})), // older than asked
	}

	// Notifications: garbage, another policy's, then the real one.
	notifications := [][]byte{
		[]byte{0xc1},
		mustMarshal(t, map[string]any{"policy": "other", "version": 9, "epoch": 42}),
		mustMarshal(t, map[string]any{"policy": "default", "version": 5, "epoch": 42}),
	}
	f := newFollower(s, n)
	var requests int
	deadline := time.Now().Add(10 * time.Second)
	for len(f.got) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no parameters; stats %+v", s.Stats())
		}
		// PUB drops messages until the subscription has arrived, so
		// notifications are sent until the subscriber has asked for v5.
		for _, m := range notifications {
			fake.pub.SendBytes(m, zmq.DONTWAIT)
		}
		p, err := s.Poll(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			f.got = append(f.got, p.Version)
			break
		}
		msg, err := fake.router.RecvMessageBytes(zmq.DONTWAIT)
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		requests++
		var req struct {
			MinVersion int64 `msgpack:"min_version"`
		}
		if err := msgpack.Unmarshal(msg[1], &req); err != nil {
			t.Fatal(err)
		}
		if req.MinVersion != 5 {
			// An early request from the record's version 0: refuse it.
			fake.router.SendMessage(msg[0], reply(with(map[string]any{"version": int64(0), "error": "no_params", "message": "x"})))
			continue
		}
		for _, r := range append(append(malformedReplies, staleReplies...), reply(with(map[string]any{"data": flat}))) {
			if _, err := fake.router.SendMessage(msg[0], r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f.got[0] != 5 {
		t.Fatalf("got version %d, want 5", f.got[0])
	}
	st := s.Stats()
	// The malformed record, two malformed notifications (at least), the
	// malformed replies.
	if min := int64(1 + 2 + len(malformedReplies)); st.Malformed < min {
		t.Errorf("malformed %d, want at least %d (stats %+v)", st.Malformed, min, st)
	}
	if st.Stale != int64(len(staleReplies)) {
		t.Errorf("stale %d, want %d", st.Stale, len(staleReplies))
	}
}

// TestPublisherSurvivesHostileLengths: fetch requests of a few bytes whose
// headers claim gigabytes are dropped as malformed without allocating what
// they claim, and a good request after them is served.
func TestPublisherSurvivesHostileLengths(t *testing.T) {
	pub := startPublisher(t, workertest.Repo(t), nil)
	pub.publish(t, 1, paramsFor(1, 8))
	client := newSocket(t, zmq.DEALER)
	if err := client.Connect("tcp://" + pub.pub.FetchAddr()); err != nil {
		t.Fatal(err)
	}
	frames := mptest.InMaps("policy", "min_version")
	alloc := mptest.Allocated(func() {
		for _, f := range frames {
			if _, err := client.SendBytes(f.Bytes, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := client.SendBytes(mustMarshal(t, map[string]any{"policy": "default", "min_version": 1}), 0); err != nil {
			t.Fatal(err)
		}
		var reply struct {
			Version int64 `msgpack:"version"`
		}
		if err := msgpack.Unmarshal(recvTimeout(t, client)[0], &reply); err != nil || reply.Version != 1 {
			t.Errorf("good request after the hostile ones: version %d, %v", reply.Version, err)
		}
	})
	t.Logf("%d hostile frames: %d bytes allocated", len(frames), alloc)
	if alloc > mptest.AllocBound {
		t.Errorf("allocated %d bytes for %d hostile frames, want at most %d", alloc, len(frames), mptest.AllocBound)
	}
	if st := pub.stats(t); st.Malformed != int64(len(frames)) || st.Served != 1 {
		t.Errorf("stats %+v, want %d malformed and 1 served", st, len(frames))
	}
}
