package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// TestWorkerSurvivesHostileLengths sends a live echo worker requests whose
// str, bin, ext, array and map headers claim up to 4 GB in a few bytes, at
// the top level and nested in kwargs: each gets a bad_request naming the
// header, the heap grows by far less than any claim, and the worker then
// answers a good request.
func TestWorkerSurvivesHostileLengths(t *testing.T) {
	repo := workertest.Repo(t)
	r := startWorker(t, repo, "echo", 0)
	req, err := zmq.NewSocket(zmq.REQ)
	if err != nil {
		t.Fatal(err)
	}
	defer req.Close()
	req.SetLinger(0)
	req.SetRcvtimeo(10 * time.Second)
	if err := req.Connect("tcp://" + r.W.Addr()); err != nil {
		t.Fatal(err)
	}
	call := func(frame []byte) (ok any, errType, errMsg string) {
		t.Helper()
		if _, err := req.SendBytes(frame, 0); err != nil {
			t.Fatal(err)
		}
		b, err := req.RecvBytes(0)
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		var reply struct {
			OK    any `msgpack:"ok"`
			Error struct {
				Type    string `msgpack:"type"`
				Message string `msgpack:"message"`
			} `msgpack:"error"`
		}
		if err := msgpack.Unmarshal(b, &reply); err != nil {
			t.Fatalf("reply % x: %v", b, err)
		}
		return reply.OK, reply.Error.Type, reply.Error.Message
	}
	frames := mptest.Requests()
	alloc := mptest.Allocated(func() {
		for _, f := range frames {
			_, typ, msg := call(f.Bytes)
			if typ != rpc.ErrTypeBadRequest || !strings.Contains(msg, "msgpack") {
				t.Errorf("%s: reply %s %q, want a bad_request about the msgpack", f.Name, typ, msg)
			}
		}
	})
	t.Logf("%d hostile requests: %d bytes allocated", len(frames), alloc)
	if alloc > mptest.AllocBound {
		t.Errorf("the heap allocated %d bytes for %d hostile requests, want at most %d", alloc, len(frames), mptest.AllocBound)
	}
	long := mptest.Request(append([]byte{0xda, 1, 1}, strings.Repeat("p", 257)...), []byte{0x80})
	if _, typ, msg := call(long); typ != rpc.ErrTypeBadRequest || !strings.Contains(msg, "limit is 256") {
		t.Errorf("257-byte command: %s %q, want a bad_request naming the limit", typ, msg)
	}
	ping, err := msgpack.Marshal([]any{"ping", map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, typ, msg := call(ping); ok != "pong" {
		t.Errorf("ping after the hostile requests: %v %s %s", ok, typ, msg)
	}
}
