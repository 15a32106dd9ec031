package curvetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/rpc"
	zmq "github.com/pebbe/zmq4"
)

// Keys is a fresh key pair.
func Keys(t testing.TB) *rpc.CurveKeyPair {
	t.Helper()
	kp, err := rpc.NewCurveKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return &kp
}

// Raw is a plain socket of type typ connected to addr ("host:port"), a
// CURVE client of keys (nil: no CURVE at all), closed when the test ends.
func Raw(t testing.TB, typ zmq.Type, addr string, keys *rpc.CurveKeyPair) *zmq.Socket {
	t.Helper()
	sock, err := zsock.New(typ, zsock.Options{Curve: keys.SocketKeys()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	if typ == zmq.SUB {
		if err := sock.SetSubscribe(""); err != nil {
			t.Fatal(err)
		}
	}
	if err := sock.Connect(zsock.Endpoint(addr)); err != nil {
		t.Fatal(err)
	}
	return sock
}

// Monitor counts the handshakes a socket refused.
type Monitor struct {
	sock    *zmq.Socket
	refused int
}

var monitors atomic.Int64

// Watch monitors sock's handshakes from now on. Call it before any peer
// connects: the monitor sees only what happens after it is set up.
func Watch(t testing.TB, sock *zmq.Socket) *Monitor {
	t.Helper()
	addr := fmt.Sprintf("inproc://curvetest-%d", monitors.Add(1))
	failed := zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
	if err := sock.Monitor(addr, failed); err != nil {
		t.Fatal(err)
	}
	mon, err := zmq.NewSocket(zmq.PAIR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Monitoring stops before its reader closes: libzmq's I/O thread
		// sends each event with a blocking send, so an event that came
		// after the reader was gone (a refused peer retrying) would hang
		// the thread, and every socket of the process with it (libzmq
		// issue 3575). A socket closed already has stopped monitoring.
		_ = sock.Monitor("", 0)
		mon.Close()
	})
	if err := mon.Connect(addr); err != nil {
		t.Fatal(err)
	}
	return &Monitor{sock: mon}
}

// WaitRefused waits until the socket has refused at least n handshakes.
func (m *Monitor) WaitRefused(t testing.TB, n int) {
	t.Helper()
	eventually.True(t, 10*time.Second, fmt.Sprintf("%d refused handshakes", n), func() bool {
		for {
			if _, _, _, err := m.sock.RecvEvent(zmq.DONTWAIT); err != nil {
				break
			}
			m.refused++
		}
		return m.refused >= n
	})
}

// NothingReceived checks that sock has no message waiting: the peers that
// were refused never get a reply.
func NothingReceived(t testing.TB, sock *zmq.Socket, who string) {
	t.Helper()
	if msg, err := sock.RecvMessageBytes(zmq.DONTWAIT); err == nil {
		t.Errorf("%s received %d frames", who, len(msg))
	}
}
