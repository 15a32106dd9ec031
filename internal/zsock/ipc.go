package zsock

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	zmq "github.com/pebbe/zmq4"
)

// IPCEnv names the environment variable that, set to "0", keeps BindIPC
// from binding: peers on the same node then use tcp, for measuring one
// against the other.
const IPCEnv = "DISTRL_IPC"

// maxIPCPath is the longest ipc:// endpoint used: sun_path holds 108 bytes.
const maxIPCPath = len("ipc://") + 100

var ipcSeq atomic.Int64

// NodeName names this node: $SLURMD_NODENAME in a SLURM job (SLURM's name
// of the node), else the host name. Peers with the same node name share a
// filesystem for ipc:// sockets.
func NodeName() string {
	if n := os.Getenv("SLURMD_NODENAME"); n != "" {
		return n
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// BindIPC binds sock, already bound to tcp, also to a fresh ipc:// path in
// a private directory of the temporary directory, and returns that
// endpoint; libzmq removes the file when the socket closes. It returns ""
// when DISTRL_IPC is "0" or the path would be too long for a Unix socket.
func BindIPC(sock *zmq.Socket) (string, error) {
	if os.Getenv(IPCEnv) == "0" {
		return "", nil
	}
	dir := filepath.Join(os.TempDir(), "distrl-ipc-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("ipc directory: %w", err)
	}
	ep := "ipc://" + filepath.Join(dir, fmt.Sprintf("%d-%d.sock", os.Getpid(), ipcSeq.Add(1)))
	if len(ep) > maxIPCPath {
		return "", nil
	}
	if err := sock.Bind(ep); err != nil {
		return "", fmt.Errorf("bind %s: %w", ep, err)
	}
	return ep, nil
}

// Advertise is the address record of a socket bound at the tcp address
// addr ("host:port") and, unless ipc is "", at the ipc endpoint ipc on
// this node: "host:port|ipc:///path|node". Endpoint reads it back.
func Advertise(addr, ipc string) string {
	if ipc == "" {
		return addr
	}
	return addr + "|" + ipc + "|" + NodeName()
}

// Endpoint turns a registered address into the ZMQ endpoint to connect to:
// "host:port" gets the tcp scheme; a value that has a scheme is used as
// is; an advertised pair (Advertise) gives its ipc endpoint on the node
// that bound it, else its tcp one.
func Endpoint(addr string) string {
	if tcp, rest, ok := strings.Cut(addr, "|"); ok {
		ipc, node, _ := strings.Cut(rest, "|")
		if strings.HasPrefix(ipc, "ipc://") && node == NodeName() {
			return ipc
		}
		addr = tcp
	}
	if strings.Contains(addr, "://") {
		return addr
	}
	return "tcp://" + addr
}
