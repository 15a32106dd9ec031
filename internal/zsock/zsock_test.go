package zsock

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/proctest"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

func TestConfigure(t *testing.T) {
	cases := []struct {
		name string
		t    zmq.Type
		o    Options
		// wanted values; ZMQ's defaults where the option is left alone
		linger         time.Duration
		maxMsg         int64
		sndHWM, rcvHWM int
		immediate, v6  bool
	}{
		{"defaults", zmq.PULL, Options{}, 0, -1, 1000, 1000, false, false},
		{"bound", zmq.PULL, Options{MaxMsgSize: 1 << 20, RecvHWM: 64, IPv6: true}, 0, 1 << 20, 1000, 64, false, true},
		{"connecting", zmq.PUSH, Options{Linger: 2 * time.Second, SendHWM: 8, Immediate: true, IPv6: true},
			2 * time.Second, -1, 8, 1000, true, true},
		{"router", zmq.ROUTER, Options{MaxMsgSize: 100, SendHWM: 4, RouterMandatory: true}, 0, 100, 4, 1000, false, false},
		{"zero HWMs untouched", zmq.DEALER, Options{Linger: time.Second}, time.Second, -1, 1000, 1000, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(c.t, c.o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, _ := s.GetType(); got != c.t {
				t.Errorf("type %v, want %v", got, c.t)
			}
			linger, _ := s.GetLinger()
			maxMsg, _ := s.GetMaxmsgsize()
			snd, _ := s.GetSndhwm()
			rcv, _ := s.GetRcvhwm()
			imm, _ := s.GetImmediate()
			v6, _ := s.GetIpv6()
			if linger != c.linger || maxMsg != c.maxMsg || snd != c.sndHWM || rcv != c.rcvHWM || imm != c.immediate || v6 != c.v6 {
				t.Errorf("LINGER %v MAXMSGSIZE %d SNDHWM %d RCVHWM %d IMMEDIATE %v IPV6 %v, want %v %d %d %d %v %v",
					linger, maxMsg, snd, rcv, imm, v6, c.linger, c.maxMsg, c.sndHWM, c.rcvHWM, c.immediate, c.v6)
			}
		})
	}
}

func TestBindRandomPort(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	haveV6 := err == nil
	if haveV6 {
		ln.Close()
	}
	cases := []struct {
		host    string
		ipv6    bool
		v6      bool // needs IPv6 loopback
		want    string
		wantErr bool
	}{
		{"127.0.0.1", false, false, "127.0.0.1:", false},
		// With IPV6 an IPv4 host is bound dual-stack and reported mapped:
		// why bound sockets set IPV6 only for IPv6 hosts.
		{"127.0.0.1", true, true, "[::ffff:127.0.0.1]:", false},
		{"::1", true, true, "[::1]:", false},
		{"[::1]", true, true, "[::1]:", false},
		{"::1", false, true, "", true},
		{"not a host", false, false, "", true},
	}
	for _, c := range cases {
		t.Run(c.host, func(t *testing.T) {
			if c.v6 && !haveV6 {
				t.Skip("no IPv6 loopback")
			}
			s, err := New(zmq.PULL, Options{IPv6: c.ipv6})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			addr, err := BindRandomPort(s, c.host)
			if c.wantErr {
				if err == nil {
					t.Fatalf("bound %s, want an error", addr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(addr, c.want) || len(addr) == len(c.want) || strings.HasSuffix(addr, ":0") {
				t.Fatalf("address %q, want %q and a port", addr, c.want)
			}
			// The address connects: a message gets through.
			push, err := New(zmq.PUSH, Options{IPv6: c.ipv6})
			if err != nil {
				t.Fatal(err)
			}
			defer push.Close()
			if err := push.Connect(Endpoint(addr)); err != nil {
				t.Fatal(err)
			}
			if _, err := push.Send("hi", 0); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Recv(0); err != nil || got != "hi" {
				t.Fatalf("received %q, %v", got, err)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	cases := []struct{ in, want string }{
		{"127.0.0.1:5555", "tcp://127.0.0.1:5555"},
		{"[::1]:5555", "tcp://[::1]:5555"},
		{"tcp://10.0.0.1:1", "tcp://10.0.0.1:1"},
		{"ipc:///tmp/x", "ipc:///tmp/x"},
		{"inproc://a", "inproc://a"},
		// Advertised pairs: ipc on the node that bound it, tcp elsewhere.
		{"127.0.0.1:5555|ipc:///tmp/d/1.sock|" + NodeName(), "ipc:///tmp/d/1.sock"},
		{"10.0.0.2:5555|ipc:///tmp/d/1.sock|another-node-" + NodeName(), "tcp://10.0.0.2:5555"},
		{"10.0.0.2:5555|tcp://evil:1|" + NodeName(), "tcp://10.0.0.2:5555"},
		{"10.0.0.2:5555|", "tcp://10.0.0.2:5555"},
	}
	for _, c := range cases {
		if got := Endpoint(c.in); got != c.want {
			t.Errorf("Endpoint(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A socket bound by Bind and BindIPC takes messages on both endpoints, and
// Advertise's record leads a peer on this node to the ipc one.
func TestBindIPC(t *testing.T) {
	pull, addr, err := Bind(zmq.PULL, "127.0.0.1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	ipc, err := BindIPC(pull)
	if err != nil || !strings.HasPrefix(ipc, "ipc://") {
		t.Fatalf("BindIPC: %q, %v", ipc, err)
	}
	rec := Advertise(addr, ipc, "")
	if got := Endpoint(rec); got != ipc {
		t.Fatalf("Endpoint(%q) = %q, want %q", rec, got, ipc)
	}
	pull.SetRcvtimeo(5 * time.Second)
	for _, ep := range []string{ipc, "tcp://" + addr} {
		push, err := New(zmq.PUSH, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := push.Connect(ep); err != nil {
			t.Fatal(err)
		}
		if _, err := push.Send(ep, 0); err != nil {
			t.Fatal(err)
		}
		got, err := pull.Recv(0)
		push.Close()
		if err != nil || got != ep {
			t.Fatalf("via %s: %q, %v", ep, got, err)
		}
	}
	t.Setenv(IPCEnv, "0")
	if ipc, err := BindIPC(pull); ipc != "" || err != nil {
		t.Fatalf("with %s=0: %q, %v; want nothing bound", IPCEnv, ipc, err)
	}
	if rec := Advertise(addr, "", ""); rec != addr {
		t.Fatalf("Advertise without ipc = %q", rec)
	}
}

// The first BindIPC of a process removes the socket files that processes
// which are gone left in the directory (libzmq removes a file only when its
// socket closes), and only those.
func TestBindIPCSweepsDeadProcessesFiles(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := filepath.Join(os.TempDir(), "distrl-ipc-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("%d-3.sock", proctest.DeadPID(t))
	live := "1-3.sock" // init
	for _, n := range []string{dead, live} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ipcSwept = sync.Once{} // as in a new process
	pull, _, err := Bind(zmq.PULL, "127.0.0.1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pull.Close()
	if _, err := BindIPC(pull); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, dead)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s (pid gone) left: %v", dead, err)
	}
	if _, err := os.Stat(filepath.Join(dir, live)); err != nil {
		t.Errorf("%s (pid alive) removed: %v", live, err)
	}
}

func TestIPCOwner(t *testing.T) {
	for name, want := range map[string]int{
		"123-4.sock": 123, "123-4": 0, "123.sock": 0, "x-4.sock": 0, "123-x.sock": 0, "s-123-4": 0, "": 0,
	} {
		if got := ipcOwner(name); got != want {
			t.Errorf("ipcOwner(%q) = %d, want %d", name, got, want)
		}
	}
}

// Records are read back by Endpoint and SharedMemory on the node that
// advertised them; elsewhere they name the tcp address only.
func TestAdvertisedRecords(t *testing.T) {
	node := NodeName()
	cases := []struct {
		rec           string
		endpoint, shm string
	}{
		{"10.0.0.1:5000", "tcp://10.0.0.1:5000", ""},
		{"ipc:///x.sock", "ipc:///x.sock", ""},
		{Advertise("10.0.0.1:5000", "ipc:///x.sock", ""), "ipc:///x.sock", ""},
		{Advertise("10.0.0.1:5000", "ipc:///x.sock", "/dev/shm/d"), "ipc:///x.sock", "/dev/shm/d"},
		{Advertise("10.0.0.1:5000", "", "/dev/shm/d"), "tcp://10.0.0.1:5000", "/dev/shm/d"},
		{"10.0.0.1:5000|ipc:///x.sock|" + node + "x|shm:///dev/shm/d", "tcp://10.0.0.1:5000", ""},
		{"10.0.0.1:5000|ipc:///x.sock", "tcp://10.0.0.1:5000", ""},
		{"10.0.0.1:5000|bogus|" + node + "|bogus", "tcp://10.0.0.1:5000", ""},
	}
	for _, c := range cases {
		if got := Endpoint(c.rec); got != c.endpoint {
			t.Errorf("Endpoint(%q) = %q, want %q", c.rec, got, c.endpoint)
		}
		if got := SharedMemory(c.rec); got != c.shm {
			t.Errorf("SharedMemory(%q) = %q, want %q", c.rec, got, c.shm)
		}
	}
}

func TestErrno(t *testing.T) {
	cases := []struct {
		name              string
		err               error
		eagain, unreached bool
	}{
		{"nil", nil, false, false},
		{"other", errors.New("boom"), false, false},
		{"EAGAIN", zmq.Errno(syscall.EAGAIN), true, false},
		{"EHOSTUNREACH", zmq.Errno(syscall.EHOSTUNREACH), false, true},
		{"ETERM", zmq.ETERM, false, false},
	}
	for _, c := range cases {
		if got := IsEAGAIN(c.err); got != c.eagain {
			t.Errorf("%s: IsEAGAIN = %v", c.name, got)
		}
		if got := IsHostUnreachable(c.err); got != c.unreached {
			t.Errorf("%s: IsHostUnreachable = %v", c.name, got)
		}
	}
	// And as a socket reports it.
	s, err := New(zmq.PULL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.RecvBytes(zmq.DONTWAIT); !IsEAGAIN(err) {
		t.Errorf("receive on an empty socket: %v, want EAGAIN", err)
	}
}

func TestDecoder(t *testing.T) {
	one, _ := msgpack.Marshal(map[string]int{"a": 1}) // 4 bytes
	two := append(append([]byte(nil), one...), one...)
	cases := []struct {
		name     string
		frame    []byte
		resetErr bool // rejected by the check before decoding
	}{
		{"one value", one, false},
		{"trailing value", two, true},
		{"truncated", one[:len(one)-1], true},
		{"empty", nil, true},
		{"bin32 claiming 4 GB", []byte{0x81, 0xa1, 'a', 0xc6, 0xff, 0xff, 0xff, 0xff, 0}, true},
	}
	d := NewDecoder() // reused on purpose
	for _, c := range cases {
		dec, err := d.Reset(c.frame)
		if (err != nil) != c.resetErr {
			t.Errorf("%s: Reset error %v, want error %v", c.name, err, c.resetErr)
			continue
		}
		if err != nil {
			continue
		}
		var v map[string]int
		if err := dec.Decode(&v); err != nil || v["a"] != 1 {
			t.Errorf("%s: decoded %v, %v", c.name, v, err)
		}
		if err := d.Finish(); err != nil {
			t.Errorf("%s: Finish = %v", c.name, err)
		}
	}
	// Finish reports what the caller left unread.
	dec, err := d.Reset([]byte{0x92, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dec.DecodeArrayLen(); err != nil {
		t.Fatal(err)
	}
	if err := d.Finish(); err == nil || err.Error() != "2 trailing bytes after the message" {
		t.Errorf("Finish after reading a header = %v", err)
	}
}

// Key reads short keys without allocating and refuses what no key of the
// protocol is.
func TestDecoderKey(t *testing.T) {
	d := NewDecoder()
	for _, c := range []struct {
		name, want, err string
		frame           []byte
	}{
		{name: "str", frame: []byte{0xa3, 'i', 'd', 's'}, want: "ids"},
		{name: "bin", frame: []byte{0xc4, 2, 'o', 'k'}, want: "ok"},
		{name: "32 bytes", frame: append([]byte{0xd9, 32}, bytes.Repeat([]byte{'k'}, 32)...), want: strings.Repeat("k", 32)},
		{name: "33 bytes", frame: append([]byte{0xd9, 33}, bytes.Repeat([]byte{'k'}, 33)...), err: "at most 32"},
		{name: "nil", frame: []byte{0xc0}, err: "want a key"},
		{name: "a number", frame: []byte{0x01}, err: "invalid code"},
	} {
		if _, err := d.Reset(c.frame); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		key, err := d.Key()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || string(key) != c.want {
			t.Errorf("%s: Key() = %q, %v; want %q", c.name, key, err, c.want)
		}
	}
	frame := []byte{0xa9, 'i', 'n', 'f', 'e', 'r', 'e', 'n', 'c', 'e'}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := d.Reset(frame); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Key(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Key allocates %v times", n)
	}
}

func TestRateLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	r := RateLog{Interval: time.Hour}
	steps := []struct {
		interval time.Duration // set before the call
		wantLine string        // "" = suppressed
	}{
		{time.Hour, "msg=bad n=0\n"},
		{time.Hour, ""},
		{time.Hour, ""},
		{time.Nanosecond, "msg=bad n=3 suppressed=2\n"},
		{time.Nanosecond, "msg=bad n=4\n"},
	}
	for i, s := range steps {
		buf.Reset()
		r.Interval = s.interval
		time.Sleep(time.Microsecond)
		r.Warn(log, "bad", "n", i)
		got := buf.String()
		if s.wantLine == "" && got != "" || s.wantLine != "" && !strings.HasSuffix(got, "level=WARN "+s.wantLine) {
			t.Errorf("step %d: logged %q, want %q", i, got, s.wantLine)
		}
	}
}
