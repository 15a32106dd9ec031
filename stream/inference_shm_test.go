package stream_test

import (
	"os"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/stream"
	"golang.org/x/sys/unix"
)

// sameNode runs test for each way a client reaches a server of its own
// process: handed over in memory (the default) and through a shared-memory
// ring (DISTRL_INPROCESS=0), as a server in another process on the node.
func sameNode(t *testing.T, test func(t *testing.T)) {
	for _, tc := range []struct{ name, env string }{{"in process", ""}, {"shared memory", "0"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(stream.InProcessEnv, tc.env)
			test(t)
		})
	}
}

// Requests to a policy worker of this process are handed over in memory,
// to one elsewhere on this node go through shared memory, unless
// DISTRL_SHM=0; the answers are the same every way.
func TestInferenceTransports(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shm, proc string // the environment
		// How many of the requests go in process and through shared
		// memory; whether the two sides attach (are on one node).
		inProcess, shared, attached bool
	}{
		{name: "in process", inProcess: true, attached: true},
		{name: "shared memory", proc: "0", shared: true, attached: true},
		{name: "zmq", shm: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(shm.Env, tc.shm)
			t.Setenv(stream.InProcessEnv, tc.proc)
			repo := workertest.Repo(t)
			srv := newServer(t, repo, 0, nil)
			c := newClient(t, repo, 0)
			for i := range 20 {
				drive(t, []stream.InferenceClient{c}, []*server{srv}, post(t, c, seq(10*i, 3)...))
			}
			st := c.Stats()
			all := func(want bool, n int64) bool { return want == (n == st.Messages) && (want || n == 0) }
			if st.Messages == 0 || !all(tc.shared, st.SharedMemory) || !all(tc.inProcess || tc.shared, st.SameProcess) {
				t.Errorf("%d request messages, %d of them over shared memory, %d to this process's server", st.Messages, st.SharedMemory, st.SameProcess)
			}
			if tc.inProcess != (st.Bytes == 0) {
				t.Errorf("%d bytes encoded for %d request messages", st.Bytes, st.Messages)
			}
			if got, want := srv.SharedMemoryClients(), map[bool]int{true: 1}[tc.attached]; got != want {
				t.Errorf("server has %d same-node clients, want %d", got, want)
			}
			if got, want := c.SharedMemoryServers(), map[bool]int{true: 1}[tc.attached]; got != want {
				t.Errorf("client has %d same-node servers, want %d", got, want)
			}
			if got, want := len(c.WaitFds()), map[bool]int{true: 1}[tc.attached]; got != want {
				t.Errorf("client waits on %d descriptors, want %d", got, want)
			}
		})
	}
}

// A request larger than a ring goes over ZMQ, or in process to a server of
// this process.
func TestInferenceLargeRequestOverZMQ(t *testing.T) {
	sameNode(t, testInferenceLargeRequest)
}

func testInferenceLargeRequest(t *testing.T) {
	repo := workertest.Repo(t)
	const dim = shm.DefaultCapacity/4 + 16
	srv := newServer(t, repo, 0, func(o *stream.InferenceServerOptions) { o.ObsDim = dim })
	c, err := stream.NewRemoteInferenceClient(ctxT(t), stream.RemoteInferenceOptions{
		Repo: repo, Trial: testTrial, ObsDim: dim, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	obs := make([]float32, dim)
	obs[0], obs[1] = 3, 3.5
	id, err := c.Post(obs)
	if err != nil {
		t.Fatal(err)
	}
	ps := []pending{{c: c, id: id, x: 3}}
	drive(t, []stream.InferenceClient{c}, []*server{srv}, ps)
	if st := c.Stats(); st.Messages != 1 || st.SharedMemory != 0 || st.SameProcess != int64(inProcess(t)) {
		t.Errorf("stats %+v: want the one message over ZMQ (in process: %d)", st, inProcess(t))
	}
	if srv.SharedMemoryClients() != 1 {
		t.Error("the client did not attach over shared memory")
	}
}

// inProcess is 1 where a test's clients reach the servers of this process
// in memory (sameNode), else 0.
func inProcess(t *testing.T) int {
	if os.Getenv(stream.InProcessEnv) == "0" {
		return 0
	}
	return 1
}

// Each side's doorbell becomes readable when the other sends while it is
// about to sleep: that is what wakes an idle worker.
func TestInferenceDoorbells(t *testing.T) { sameNode(t, testInferenceDoorbells) }

func testInferenceDoorbells(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	c := newClient(t, repo, 0)
	drive(t, []stream.InferenceClient{c}, []*server{srv}, post(t, c, 1)) // attached
	readable := func(fds []int) bool {
		if len(fds) != 1 {
			t.Fatalf("%d descriptors", len(fds))
		}
		p := []unix.PollFd{{Fd: int32(fds[0]), Events: unix.POLLIN}}
		n, _ := unix.Poll(p, 5000)
		return n == 1
	}
	srv.serve(t, 16) // drains the server's doorbell
	if !srv.PrepareWait() {
		t.Fatal("server: PrepareWait with nothing waiting says do not sleep")
	}
	ps := post(t, c, 2)
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !readable(srv.WaitFds()) {
		t.Fatal("the server's doorbell did not ring")
	}
	if srv.PrepareWait() {
		t.Error("server: PrepareWait with a request waiting says sleep")
	}
	if err := c.Poll(); err != nil { // drains the client's doorbell
		t.Fatal(err)
	}
	if !c.PrepareWait() {
		t.Fatal("client: PrepareWait with nothing waiting says do not sleep")
	}
	srv.serve(t, 16)
	if !readable(c.WaitFds()) {
		t.Fatal("the client's doorbell did not ring")
	}
	drive(t, []stream.InferenceClient{c}, []*server{srv}, ps)
}

// Garbage sent over shared memory is dropped and counted like garbage over
// ZMQ, and the server goes on serving its other clients.
func TestInferenceServerDropsMalformedSharedMemory(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	good := newClient(t, repo, 0)
	rec, err := repo.Get(ctxT(t), testTrial.Stream("inference", stream.DefaultPolicy, 0))
	if err != nil {
		t.Fatal(err)
	}
	dir := zsock.SharedMemory(rec)
	if dir == "" {
		t.Fatalf("record %q offers no shared memory", rec)
	}
	rogue, err := shm.NewClient(shm.DefaultDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	ch, err := rogue.Dial(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, junk := range [][]byte{nil, []byte("not msgpack"), {0x82, 0xa3, 'i', 'd', 's'}} {
		if err := ch.Send(junk); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.Stats().Malformed < 3 && time.Now().Before(deadline) {
		srv.serve(t, 16)
	}
	if got := srv.Stats().Malformed; got != 3 {
		t.Fatalf("malformed %d, want 3", got)
	}
	drive(t, []stream.InferenceClient{good}, []*server{srv}, post(t, good, 5, 6))
}

// A client drops the channels of every policy worker that unregisters, all
// of them when they go at once.
func TestInferenceClientDropsUnregisteredServers(t *testing.T) {
	sameNode(t, testInferenceClientDropsUnregisteredServers)
}

func testInferenceClientDropsUnregisteredServers(t *testing.T) {
	repo := workertest.Repo(t)
	servers := []*server{newServer(t, repo, 0, nil), newServer(t, repo, 1, nil), newServer(t, repo, 2, nil)}
	c := newClient(t, repo, 0)
	deadline := time.Now().Add(10 * time.Second)
	for c.SharedMemoryServers() < len(servers) && time.Now().Before(deadline) {
		drive(t, []stream.InferenceClient{c}, servers, post(t, c, 1))
	}
	if n := c.SharedMemoryServers(); n != len(servers) {
		t.Fatalf("attached to %d of %d servers", n, len(servers))
	}
	for _, s := range servers {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for c.SharedMemoryServers() > 0 && time.Now().Before(deadline.Add(10*time.Second)) {
		if err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if n := c.SharedMemoryServers(); n != 0 {
		t.Fatalf("%d channels left after every server unregistered", n)
	}
}

// A server takes requests from its shared-memory clients in turn: a client
// with many requests queued does not keep another's waiting past the next
// batch.
func TestInferenceServerTakesSharedMemoryClientsInTurn(t *testing.T) {
	sameNode(t, testInferenceServerTakesSharedMemoryClientsInTurn)
}

func testInferenceServerTakesSharedMemoryClientsInTurn(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	a, b := newClient(t, repo, 0), newClient(t, repo, 0)
	clients := []stream.InferenceClient{a, b}
	drive(t, clients, []*server{srv}, append(post(t, a, 1), post(t, b, 2)...))
	if srv.SharedMemoryClients() != 2 {
		t.Fatalf("%d shared-memory clients, want 2", srv.SharedMemoryClients())
	}
	for round, c := range [][2]*stream.RemoteInferenceClient{{a, b}, {b, a}, {a, b}} {
		busy, light := c[0], c[1]
		// The busy client's request is the last the server took.
		drive(t, clients, []*server{srv}, post(t, busy, 5))
		var queued []pending
		for i := range 4 {
			queued = append(queued, post(t, busy, float32(10+i))...)
			if err := busy.Flush(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		waiting := post(t, light, 99)
		if err := light.Flush(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		srv.serve(t, 2) // room for two of the five requests
		if err := light.Poll(); err != nil {
			t.Fatal(err)
		}
		if !light.Ready(waiting[0].id) {
			t.Fatalf("round %d: the client with one request waited behind the one with four", round)
		}
		drive(t, clients, []*server{srv}, append(queued, waiting...))
	}
}

// A server whose clients are on shared memory looks at its ZeroMQ socket
// less often while nothing comes there (zmqRecheck); a client on ZeroMQ
// beside them (a client on another node) is still answered, round after
// round, while the shared-memory traffic goes on.
func TestInferenceZMQClientBesideSharedMemory(t *testing.T) {
	sameNode(t, testInferenceZMQClientBesideSharedMemory)
}

func testInferenceZMQClientBesideSharedMemory(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	local := newClient(t, repo, 0)
	t.Setenv(shm.Env, "0") // the next client does not attach
	remote := newClient(t, repo, 0)
	clients := []stream.InferenceClient{local, remote}
	for i := range 50 {
		ps := append(post(t, local, seq(10*i, 4)...), post(t, remote, float32(1000+i))...)
		drive(t, clients, []*server{srv}, ps)
	}
	if st := remote.Stats(); st.SharedMemory != 0 || st.Messages != 50 {
		t.Errorf("remote client: %d of %d messages over shared memory; want 0 of 50", st.SharedMemory, st.Messages)
	}
	if st := local.Stats(); st.SameProcess != st.Messages || st.SharedMemory != st.Messages*int64(1-inProcess(t)) {
		t.Errorf("local client: %d of %d messages to this process's server, %d over shared memory", st.SameProcess, st.Messages, st.SharedMemory)
	}
	if n := srv.SharedMemoryClients(); n != 1 {
		t.Errorf("%d shared-memory clients, want 1", n)
	}
}
