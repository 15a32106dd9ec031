package curvetest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

const childEnv = "CURVETEST_CHILD"

// A monitor that is cleaned up while a refused peer goes on retrying
// leaves the process's sockets working: libzmq sends monitor events with a
// blocking send from its I/O thread, so a reader closed before monitoring
// stopped hung that thread, and every socket of the process with it (the
// stream tests that ran after the CURVE tests then failed one after the
// other). The scenario runs in a child process, which a hung I/O thread
// does not outlive.
func TestWatchCleanupKeepsSocketsWorking(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWatchCleanupKeepsSocketsWorking$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1")
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	keys := Keys(t)
	srv, addr, err := zsock.Bind(zmq.ROUTER, "127.0.0.1", zsock.Options{Curve: keys.SocketKeys()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// The outsiders outlive the monitor; one with another key pair keeps
	// being refused as it reconnects.
	for _, k := range []*rpc.CurveKeyPair{nil, Keys(t)} {
		if _, err := Raw(t, zmq.DEALER, addr, k).SendBytes([]byte("x"), zmq.DONTWAIT); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("watch", func(t *testing.T) { Watch(t, srv).WaitRefused(t, 2) })
	time.Sleep(500 * time.Millisecond) // refusals go on after the cleanup
	Watch(t, srv).WaitRefused(t, 2)    // a second monitor sees them

	pull, paddr, err := zsock.Bind(zmq.PULL, "127.0.0.1", zsock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	push := Raw(t, zmq.PUSH, paddr, nil)
	if _, err := push.Send("after", 0); err != nil {
		t.Fatal(err)
	}
	if err := pull.SetRcvtimeo(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if msg, err := pull.Recv(0); err != nil || msg != "after" {
		t.Fatalf("a plain PUSH/PULL after the monitor's cleanup: %q, %v: the I/O thread hangs", msg, err)
	}
}
