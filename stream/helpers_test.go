package stream_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/etcdtest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/stream"
	zmq "github.com/pebbe/zmq4"
)

var testTrial = names.NewTrial("streamtest", "t1")

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	os.Exit(code)
}

// testLogger sends logs to the test's log, shown on failure or with -v.
func testLogger(t testing.TB) *slog.Logger { return workertest.Logger(t, slog.LevelDebug) }

func ctxT(t testing.TB) context.Context { return workertest.Ctx(t, 10*time.Second) }

// ---- inference ----

const obsDim = 4

// testPolicy is the deterministic "policy" tests serve: the action is
// obs[0] as an integer, the value 2*obs[0], the log-probability -obs[1].
func testPolicy(obs api.Tensor[float32], out *api.Inference) {
	n := obs.Shape[0]
	out.Actions.Resize(n)
	out.LogProbs.Resize(n)
	out.Values.Resize(n)
	for i := range n {
		row := obs.Row(i)
		out.Actions.Data[i] = int32(row[0])
		out.Values.Data[i] = 2 * row[0]
		out.LogProbs.Data[i] = -row[1]
	}
	out.Version = 7
}

// wantResult is what testPolicy answers for an observation starting with x.
func wantResult(x float32) stream.InferenceResult {
	return stream.InferenceResult{Action: int32(x), Value: 2 * x, LogProb: -(x + 0.5), Version: 7}
}

// obsFor is an observation whose answer identifies it.
func obsFor(x float32) []float32 { return []float32{x, x + 0.5, 0, 1} }

type server struct {
	*stream.InferenceServer
	batch  stream.InferenceBatch
	out    api.Inference
	polls  []int // rows of each non-empty Poll
	reqs   []int // requests of each non-empty Poll
	poller *zmq.Poller
	dim    int // observation length
}

func newServer(t *testing.T, repo nameresolve.Repository, index int, mod func(*stream.InferenceServerOptions)) *server {
	t.Helper()
	opts := stream.InferenceServerOptions{
		Repo: repo, Trial: testTrial, Index: index, TTL: time.Second, ObsDim: obsDim, Logger: testLogger(t),
	}
	if mod != nil {
		mod(&opts)
	}
	s, err := stream.NewInferenceServer(ctxT(t), opts)
	if err != nil {
		t.Fatalf("NewInferenceServer: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	p := zmq.NewPoller()
	p.Add(s.Socket(), zmq.POLLIN)
	return &server{InferenceServer: s, poller: p, dim: cmp.Or(opts.ObsDim, obsDim)}
}

// serve answers what has arrived with testPolicy; it returns the rows.
func (s *server) serve(t *testing.T, maxRows int) int {
	t.Helper()
	rows, err := s.Poll(maxRows, &s.batch)
	if err != nil {
		t.Fatalf("server Poll: %v", err)
	}
	if rows == 0 {
		return 0
	}
	if got := s.batch.Obs.Shape; len(got) != 2 || got[0] != rows || got[1] != s.dim {
		t.Fatalf("batch shape %v, want [%d %d]", got, rows, s.dim)
	}
	s.polls = append(s.polls, rows)
	s.reqs = append(s.reqs, s.batch.Requests())
	testPolicy(s.batch.Obs, &s.out)
	if err := s.Respond(&s.batch, &s.out); err != nil {
		t.Fatalf("Respond: %v", err)
	}
	return rows
}

func newClient(t *testing.T, repo nameresolve.Repository, timeout time.Duration) *stream.RemoteInferenceClient {
	t.Helper()
	c, err := stream.NewRemoteInferenceClient(ctxT(t), stream.RemoteInferenceOptions{
		Repo: repo, Trial: testTrial, ObsDim: obsDim, Timeout: timeout, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("NewRemoteInferenceClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pending is a posted observation and its id.
type pending struct {
	c  stream.InferenceClient
	id stream.ReqID
	x  float32
}

func post(t *testing.T, c stream.InferenceClient, xs ...float32) []pending {
	t.Helper()
	out := make([]pending, len(xs))
	for i, x := range xs {
		id, err := c.Post(obsFor(x))
		if err != nil {
			t.Fatalf("Post: %v", err)
		}
		out[i] = pending{c: c, id: id, x: x}
	}
	return out
}

// drive flushes and polls the clients and serves with the servers until
// every request in ps is Ready, then checks each result.
func drive(t *testing.T, clients []stream.InferenceClient, servers []*server, ps []pending) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, c := range clients {
			if err := c.Flush(ctxT(t)); err != nil {
				t.Fatalf("Flush: %v", err)
			}
		}
		for _, s := range servers {
			s.serve(t, 1024)
		}
		ready := true
		for _, c := range clients {
			if err := c.Poll(); err != nil {
				t.Fatalf("client Poll: %v", err)
			}
		}
		for _, p := range ps {
			ready = ready && p.c.Ready(p.id)
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests not ready after 10 s; warnings %q", warnings(clients))
		}
		time.Sleep(time.Millisecond)
	}
	for _, p := range ps {
		got, err := p.c.Consume(p.id)
		if err != nil {
			t.Fatalf("Consume(%d): %v", p.id, err)
		}
		if want := wantResult(p.x); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("request %d (x=%v): got %+v, want %+v", p.id, p.x, got, want)
		}
	}
}

func warnings(cs []stream.InferenceClient) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Warning())
	}
	return out
}

func seq(from, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(from + i)
	}
	return out
}

// rawSocket connects a plain zmq socket of type typ to a stream endpoint
// (host:port), for sending what the stream's own clients never would. It
// is closed, discarding anything unsent, when the test ends.
func rawSocket(t *testing.T, typ zmq.Type, addr string) *zmq.Socket {
	t.Helper()
	sock, err := zmq.NewSocket(typ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	if err := sock.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	if err := sock.Connect("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	return sock
}
