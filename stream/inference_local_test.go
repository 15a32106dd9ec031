package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/stream"
	"golang.org/x/sys/unix"
)

// Requests queued for a server of this process that closes before it takes
// them time out, as with any server that goes away; the client drops its
// link and is served in process by the next server.
func TestInProcessServerCloses(t *testing.T) {
	repo := workertest.Repo(t)
	first := newServer(t, repo, 0, nil)
	c := newClient(t, repo, 300*time.Millisecond)
	drive(t, []stream.InferenceClient{c}, []*server{first}, post(t, c, 1))
	lost := post(t, c, 2, 3)
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "queued requests expire", func() bool {
		if err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		return c.Ready(lost[1].id)
	})
	for _, p := range lost {
		if _, err := c.Consume(p.id); !errors.Is(err, stream.ErrInferenceFailed) {
			t.Errorf("Consume(%d) = %v, want ErrInferenceFailed", p.id, err)
		}
	}
	eventually.True(t, 10*time.Second, "the link is dropped", func() bool {
		if err := c.Poll(); err != nil {
			t.Fatal(err)
		}
		return c.SharedMemoryServers() == 0
	})

	second := newServer(t, repo, 1, nil)
	before := c.Stats()
	drive(t, []stream.InferenceClient{c}, []*server{second}, post(t, c, 4, 5))
	if st := c.Stats(); st.SameProcess-before.SameProcess != st.Messages-before.Messages || st.Messages == before.Messages {
		t.Errorf("after the second server came: %d request messages, %d of them in process",
			st.Messages-before.Messages, st.SameProcess-before.SameProcess)
	}
}

// A reply to a client of this process that has closed is counted as
// undeliverable, and the server forgets the client.
func TestInProcessClientCloses(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	c := newClient(t, repo, 0)
	drive(t, []stream.InferenceClient{c}, []*server{srv}, post(t, c, 1))
	if n := srv.SharedMemoryClients(); n != 1 {
		t.Fatalf("%d same-node clients, want 1", n)
	}
	post(t, c, 2)
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rows, err := srv.Poll(16, &srv.batch)
	if err != nil || rows != 1 {
		t.Fatalf("Poll = %d, %v; want the request", rows, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	testPolicy(srv.batch.Obs, &srv.out)
	if err := srv.Respond(&srv.batch, &srv.out); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Undeliverable != 1 || st.Replies != 1 {
		t.Errorf("server stats %+v: want 1 reply, 1 undeliverable", st)
	}
	if n := srv.SharedMemoryClients(); n != 0 {
		t.Errorf("%d same-node clients after the client closed, want 0", n)
	}
}

// A client and a server of one process on goroutines of their own, each
// sleeping on its doorbell when it has nothing to do, as two workers' loops
// would: every request is answered with its own results (run with -race).
func TestInProcessAcrossGoroutines(t *testing.T) {
	repo := workertest.Repo(t)
	srv := newServer(t, repo, 0, nil)
	c := newClient(t, repo, 0)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var b stream.InferenceBatch
		var out api.Inference
		for ctx.Err() == nil {
			n, err := srv.Poll(64, &b)
			if err != nil {
				t.Error(err)
				return
			}
			if n == 0 {
				if srv.PrepareWait() && !sleepOn(srv.WaitFds()) && ctx.Err() == nil {
					t.Error("server: the doorbell did not ring within 5 s")
				}
				continue
			}
			testPolicy(b.Obs, &out)
			if err := srv.Respond(&b, &out); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	const rounds, rows = 2000, 8
	for round := range rounds {
		ps := post(t, c, seq(round*rows, rows)...)
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !c.Ready(ps[rows-1].id) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no reply within 10 s", round)
			}
			if c.PrepareWait() && !sleepOn(c.WaitFds()) {
				t.Fatalf("round %d: client: the doorbell did not ring within 5 s", round)
			}
			if err := c.Poll(); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range ps {
			got, err := c.Consume(p.id)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(wantResult(p.x)) {
				t.Fatalf("round %d: Consume(%d) = %+v, %v; want %+v", round, p.id, got, err, wantResult(p.x))
			}
		}
	}
	cancel()
	post(t, c, 0) // wakes the server, to see the context ended
	if err := c.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if st := c.Stats(); st.SameProcess != rounds+1 || st.Replies < rounds*rows {
		t.Errorf("client stats %+v: want %d requests in process, %d replies", st, rounds, rounds*rows)
	}
}

// sleepOn waits until one of fds is readable, for at most 5 s; false when
// none became readable: nobody rang.
func sleepOn(fds []int) bool {
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for {
		n, err := unix.Poll(pfds, 5000)
		if err != unix.EINTR {
			return n > 0
		}
	}
}
