package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// swapper is a worker type whose socket changes while it runs
// (worker.SocketSetter), as a DQN trainer's replay sockets do when shards
// come and go: each message its PULL socket receives makes its Poll close
// that socket and bind a new one, whose endpoint it hands to the test.
type swapper struct {
	pull      *zmq.Socket
	version   uint64
	endpoints chan string
}

var _ worker.SocketSetter = (*swapper)(nil)

func (s *swapper) Configure(context.Context, rpc.Args) error { return s.rebind() }

func (s *swapper) rebind() error {
	if s.pull != nil {
		s.pull.Close()
	}
	pull, err := bindPull("tcp://127.0.0.1:*")
	if err != nil {
		return err
	}
	ep, err := pull.GetLastEndpoint()
	if err != nil {
		return err
	}
	s.pull = pull
	s.version++
	s.endpoints <- ep
	return nil
}

func (s *swapper) Poll(context.Context) (worker.PollResult, error) {
	if _, err := s.pull.Recv(zmq.DONTWAIT); err != nil {
		return worker.PollResult{}, nil
	}
	return worker.PollResult{Batches: 1}, s.rebind()
}

func (s *swapper) Sockets() []*zmq.Socket { return []*zmq.Socket{s.pull} }
func (s *swapper) SocketsVersion() uint64 { return s.version }
func (s *swapper) Stats() map[string]any  { return map[string]any{} }
func (s *swapper) Close() error           { return s.pull.Close() }

// A worker that closes its socket in Poll and binds another is never
// waited on through the closed one (the loop would fail on it), and the
// new one wakes it: twenty swaps take less than the loop's sweeps would.
func TestSocketSetChangesInPoll(t *testing.T) {
	sw := &swapper{endpoints: make(chan string, 1)}
	reg := workertest.Registry(map[string]worker.Factory{"swapper": func(worker.Info) (worker.Impl, error) { return sw, nil }})
	repo := workertest.Repo(t)
	w := workertest.StartChecked(t, worker.Options{Trial: testTrial, Registry: reg, Type: "swapper", Host: "127.0.0.1", Repo: repo,
		IdleWait: time.Hour, Logger: workertest.Logger(t, slog.LevelWarn)})
	panel := workertest.Panel(t, repo, testTrial)
	for _, cmd := range []string{"configure", "start"} {
		if err := panel.Request(ctxT(t), w.Name(), cmd, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		select {
		case ep := <-sw.endpoints:
			return ep
		case <-time.After(5 * time.Second):
			t.Fatal("the worker did not bind a new socket within 5 s")
			return ""
		}
	}
	ep := next()
	const swaps = 20
	began := time.Now()
	for range swaps {
		push, err := zmq.NewSocket(zmq.PUSH)
		if err != nil {
			t.Fatal(err)
		}
		if err := push.Connect(ep); err != nil {
			t.Fatal(err)
		}
		if _, err := push.Send("swap", 0); err != nil {
			t.Fatal(err)
		}
		ep = next()
		push.SetLinger(0)
		push.Close()
	}
	sweeps := float64(time.Since(began)) / float64(worker.DefaultIdleWait)
	if float64(swaps) < 1.5*(sweeps+1) {
		t.Fatalf("%d swaps in %.1f sweep intervals: the new sockets did not wake the worker", swaps, sweeps)
	}
	var st member.Status
	if err := panel.Request(ctxT(t), w.Name(), "status", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.State != member.StateRunning {
		t.Fatalf("state %s (%s), want RUNNING", st.State, st.Error)
	}
}
