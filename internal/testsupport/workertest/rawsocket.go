package workertest

import (
	"testing"
	"time"

	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve"
	zmq "github.com/pebbe/zmq4"
)

// RawSocket is a bare socket of type typ connected to the endpoint
// registered under key (a stream record: "host:port|ipc://...|node"), for
// sending what no client of the project would; it is closed, without
// lingering, when the test ends.
func RawSocket(t testing.TB, repo nameresolve.Repository, key string, typ zmq.Type) *zmq.Socket {
	t.Helper()
	addr, err := repo.Get(Ctx(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	sock, err := zmq.NewSocket(typ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sock.SetLinger(0)
		_ = sock.Close()
	})
	if err := sock.Connect(zsock.Endpoint(addr)); err != nil {
		t.Fatalf("connect to %q: %v", addr, err)
	}
	return sock
}
