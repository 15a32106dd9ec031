package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/proctest"
	"golang.org/x/sys/unix"
)

// pair is a listener and a client in a fresh directory, with one channel
// dialled and accepted.
func pair(t testing.TB, capacity int) (l *Listener, cl *Client, client, server *Channel) {
	t.Helper()
	parent := t.TempDir()
	l, err := Listen(parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cl, err = NewClient(parent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	client, err = cl.Dial(l.Dir(), capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	chans, err := l.Accept()
	if err != nil || len(chans) != 1 {
		t.Fatalf("Accept: %d channels, %v", len(chans), err)
	}
	server = chans[0]
	t.Cleanup(func() { server.Close() })
	return l, cl, client, server
}

func readable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n == 1
}

func TestChannelRoundTrip(t *testing.T) {
	l, cl, client, server := pair(t, MinCapacity)
	if chans, err := l.Accept(); len(chans) != 0 || err != nil {
		t.Fatalf("second Accept: %d channels, %v", len(chans), err)
	}
	if ents, _ := os.ReadDir(l.Dir()); len(ents) != 2 {
		t.Errorf("listener directory holds %d entries, want ctl and bell only (channel files unlinked once mapped)", len(ents))
	}
	var buf []byte
	// Many messages of varied sizes through a small ring: every wrap
	// position is taken.
	for i := range 2000 {
		msg := bytes.Repeat([]byte{byte(i)}, i%700)
		if err := client.Send(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		got, err := server.Recv(buf)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("message %d: got %d bytes (%v), want %d", i, len(got), err, len(msg))
		}
		if err := server.Send(got); err != nil {
			t.Fatal(err)
		}
		if back, err := client.Recv(nil); err != nil || !bytes.Equal(back, msg) {
			t.Fatalf("reply %d: %v", i, err)
		}
		buf = got
	}
	if got, err := server.Recv(nil); got != nil || err != nil {
		t.Fatalf("empty ring gave %q, %v", got, err)
	}
	if err := client.Send(nil); err != nil {
		t.Fatal(err)
	}
	if got, err := server.Recv(nil); got == nil || len(got) != 0 || err != nil {
		t.Fatalf("an empty message came out as %v, %v", got, err)
	}
	if client.PeerPID() != os.Getpid() || server.PeerPID() != os.Getpid() || !client.PeerAlive() {
		t.Error("peer pid")
	}
	_ = cl
	client.Close()
	if err := client.Send(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if _, err := client.Recv(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Close: %v", err)
	}
}

func TestChannelFullAndTooLarge(t *testing.T) {
	_, _, client, server := pair(t, MinCapacity)
	msg := make([]byte, 1000)
	sent := 0
	for ; ; sent++ {
		err := client.Send(msg)
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if sent != MinCapacity/1008 {
		t.Errorf("a %d-byte ring took %d messages of 1000 bytes, want %d", MinCapacity, sent, MinCapacity/1008)
	}
	if _, err := server.Recv(nil); err != nil {
		t.Fatal(err)
	}
	if err := client.Send(msg); err != nil {
		t.Fatalf("after one was read: %v", err)
	}
	if err := client.Send(make([]byte, MinCapacity)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	for range sent {
		if got, err := server.Recv(nil); err != nil || len(got) != 1000 {
			t.Fatalf("drain: %d bytes, %v", len(got), err)
		}
	}
}

// A peer that writes garbage makes Recv fail, never read out of bounds.
func TestChannelCorrupt(t *testing.T) {
	cases := []struct {
		name   string
		scrawl func(c *Channel)
	}{
		{"tail far ahead", func(c *Channel) { atomic.StoreUint64(c.out.tail, 1<<40) }},
		{"length past the end", func(c *Channel) {
			binary.LittleEndian.PutUint32(c.out.data[0:], uint32(len(c.out.data)))
			atomic.StoreUint64(c.out.tail, 64)
		}},
		{"length past the tail", func(c *Channel) {
			binary.LittleEndian.PutUint32(c.out.data[0:], 100)
			atomic.StoreUint64(c.out.tail, 16)
		}},
		{"wrap mark past the tail", func(c *Channel) {
			binary.LittleEndian.PutUint32(c.out.data[0:], wrapMark)
			atomic.StoreUint64(c.out.tail, 8)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, client, server := pair(t, MinCapacity)
			tc.scrawl(client)
			if _, err := server.Recv(nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Recv: %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestAcceptRejectsBadChannelFiles(t *testing.T) {
	parent := t.TempDir()
	l, err := Listen(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	regular := filepath.Join(parent, "not-a-fifo")
	os.WriteFile(regular, nil, 0o600)
	cl, err := NewClient(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tc := range []struct {
		name string
		file func() []byte
	}{
		{"short", func() []byte { return []byte("distrlC1") }},
		{"wrong magic", func() []byte { return make([]byte, headerSize+2*MinCapacity) }},
		{"doorbell not a fifo", func() []byte {
			b := make([]byte, headerSize+2*MinCapacity)
			copy(b, magic)
			binary.LittleEndian.PutUint32(b[offCapacity:], MinCapacity)
			binary.LittleEndian.PutUint32(b[offPID:], 1)
			binary.LittleEndian.PutUint16(b[offBellLen:], uint16(len(regular)))
			copy(b[offBell:], regular)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(l.Dir(), "ch-bad-1"), tc.file(), 0o600)
			pid, gen, unmap, err := openCtl(l.Dir())
			if err != nil || pid != os.Getpid() {
				t.Fatal(pid, err)
			}
			atomic.AddUint64(gen, 1)
			unmap()
			chans, err := l.Accept()
			if len(chans) != 0 || !errors.Is(err, ErrCorrupt) && err == nil {
				t.Fatalf("Accept: %d channels, %v", len(chans), err)
			}
			if _, err := os.Stat(filepath.Join(l.Dir(), "ch-bad-1")); !errors.Is(err, os.ErrNotExist) {
				t.Error("a bad channel file is left behind")
			}
		})
	}
	// A good one still comes through after the bad ones.
	if _, err := cl.Dial(l.Dir(), 0); err != nil {
		t.Fatal(err)
	}
	if chans, err := l.Accept(); len(chans) != 1 || err != nil {
		t.Fatalf("Accept: %d, %v", len(chans), err)
	}
}

// The doorbell rings when, and only when, the reader said it would sleep.
func TestDoorbell(t *testing.T) {
	l, cl, client, server := pair(t, 0)
	l.Doorbell().Drain() // Dial rang it
	if err := client.Send([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if readable(l.Doorbell().Fd()) {
		t.Error("rang a server that was not waiting")
	}
	if server.PrepareWait() {
		t.Error("PrepareWait says sleep with a message waiting")
	}
	server.Recv(nil)
	if !server.PrepareWait() {
		t.Error("PrepareWait says a message is waiting on an empty ring")
	}
	client.Send([]byte("b"))
	if !readable(l.Doorbell().Fd()) {
		t.Fatal("did not ring a server about to sleep")
	}
	l.Doorbell().Drain()
	if readable(l.Doorbell().Fd()) {
		t.Error("Drain left the doorbell readable")
	}
	client.Send([]byte("c"))
	if readable(l.Doorbell().Fd()) {
		t.Error("rang twice for one wait")
	}
	// Replies ring the client's doorbell the same way.
	client.PrepareWait()
	server.Send([]byte("r"))
	if !readable(cl.Doorbell().Fd()) {
		t.Error("did not ring a client about to sleep")
	}
}

// Listen removes what dead processes left.
func TestListenSweepsDeadProcesses(t *testing.T) {
	parent := t.TempDir()
	dead := proctest.DeadPID(t)
	stale := filepath.Join(parent, fmt.Sprintf("s-%d-1", dead))
	os.MkdirAll(stale, 0o700)
	staleBell := filepath.Join(parent, fmt.Sprintf("c-%d-7", dead))
	unix.Mkfifo(staleBell, 0o600)
	live := filepath.Join(parent, fmt.Sprintf("s-%d-1", os.Getpid()))
	os.MkdirAll(live, 0o700)
	l, err := Listen(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, p := range []string{stale, staleBell} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind", p)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's listener was removed: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Error("Close left the listener directory")
	}
}

// A client in another process: requests and replies cross, and each side
// sleeps on its doorbell between them.
func TestCrossProcess(t *testing.T) {
	if dir := os.Getenv("SHM_TEST_DIAL"); dir != "" {
		crossProcessClient(dir)
		return
	}
	parent := t.TempDir()
	l, err := Listen(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 2000
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcess$")
	cmd.Env = append(os.Environ(), "SHM_TEST_DIAL="+l.Dir(), "SHM_TEST_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ch *Channel
	var buf []byte
	deadline := time.Now().Add(30 * time.Second)
	for served := 0; served < n; {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("served %d of %d", served, n)
		}
		l.Doorbell().Drain()
		if ch == nil {
			chans, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			if len(chans) > 0 {
				ch = chans[0]
				defer ch.Close()
			}
		}
		if ch != nil {
			msg, err := ch.Recv(buf)
			if err != nil {
				t.Fatal(err)
			}
			if msg != nil {
				buf = msg
				if err := ch.Send(append(msg, '!')); err != nil {
					t.Fatal(err)
				}
				served++
				continue
			}
			if !ch.PrepareWait() {
				continue
			}
		}
		unix.Poll([]unix.PollFd{{Fd: int32(l.Doorbell().Fd()), Events: unix.POLLIN}}, 1000)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("client: %v", err)
	}
	if ch.PeerAlive() {
		t.Error("PeerAlive after the client exited")
	}
}

func crossProcessClient(dir string) {
	n, _ := strconv.Atoi(os.Getenv("SHM_TEST_N"))
	fail := func(err error) { fmt.Fprintln(os.Stderr, "client:", err); os.Exit(1) }
	cl, err := NewClient(filepath.Dir(dir))
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	ch, err := cl.Dial(dir, 0)
	if err != nil {
		fail(err)
	}
	for i := range n {
		want := fmt.Sprintf("request %d", i)
		if err := ch.Send([]byte(want)); err != nil {
			fail(err)
		}
		for {
			msg, err := ch.Recv(nil)
			if err != nil {
				fail(err)
			}
			if msg != nil {
				if string(msg) != want+"!" {
					fail(fmt.Errorf("reply %q to %q", msg, want))
				}
				break
			}
			if ch.PrepareWait() {
				unix.Poll([]unix.PollFd{{Fd: int32(cl.Doorbell().Fd()), Events: unix.POLLIN}}, 1000)
				cl.Doorbell().Drain()
			}
		}
	}
}
