package zsock

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/distrl/distrl/internal/pidfile"
	zmq "github.com/pebbe/zmq4"
)

// IPCEnv names the environment variable that, set to "0", keeps BindIPC
// from binding: peers on the same node then use tcp, for measuring one
// against the other.
const IPCEnv = "DISTRL_IPC"

// maxIPCPath is the longest ipc:// endpoint used: sun_path holds 108 bytes.
const maxIPCPath = len("ipc://") + 100

var (
	ipcSeq   atomic.Int64
	ipcSwept sync.Once
)

// ipcOwner is the pid in an ipc socket file's name "PID-SEQ.sock" (0: not
// one).
func ipcOwner(name string) int {
	base, isSock := strings.CutSuffix(name, ".sock")
	pid, seq, hasSeq := strings.Cut(base, "-")
	n, errPID := strconv.Atoi(pid)
	_, errSeq := strconv.Atoi(seq)
	if !isSock || !hasSeq || errPID != nil || errSeq != nil {
		return 0
	}
	return n
}

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
	// libzmq removes a socket's file only when the socket closes: a killed
	// process leaves its files, so the first bind of each process removes
	// those of processes that are gone.
	ipcSwept.Do(func() { _ = pidfile.Sweep(dir, ipcOwner) })
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
// this node, with, unless shm is "", the directory of a shared-memory
// listener (internal/shm) beside it: "host:port|ipc:///path|node" or
// "host:port|ipc:///path|node|shm:///dir". Endpoint and SharedMemory read
// it back.
func Advertise(addr, ipc, shm string) string {
	if ipc == "" && shm == "" {
		return addr
	}
	rec := addr + "|" + ipc + "|" + NodeName()
	if shm != "" {
		rec += "|" + shmScheme + shm
	}
	return rec
}

const shmScheme = "shm://"

// advertised splits a record into its tcp address and, when it was
// advertised on this node, its ipc endpoint and shared-memory directory.
func advertised(addr string) (tcp, ipc, shm string) {
	fields := strings.Split(addr, "|")
	if len(fields) < 3 || fields[2] != NodeName() {
		return fields[0], "", ""
	}
	if strings.HasPrefix(fields[1], "ipc://") {
		ipc = fields[1]
	}
	if len(fields) > 3 && strings.HasPrefix(fields[3], shmScheme) {
		shm = strings.TrimPrefix(fields[3], shmScheme)
	}
	return fields[0], ipc, shm
}

// Endpoint turns a registered address into the ZMQ endpoint to connect to:
// "host:port" gets the tcp scheme; a value that has a scheme is used as
// is; an advertised record (Advertise) gives its ipc endpoint on the node
// that bound it, else its tcp one.
func Endpoint(addr string) string {
	tcp, ipc, _ := advertised(addr)
	if ipc != "" {
		return ipc
	}
	if strings.Contains(tcp, "://") {
		return tcp
	}
	return "tcp://" + tcp
}

// SharedMemory is the shared-memory listener directory of an advertised
// record bound on this node; "" when it has none or was bound elsewhere.
func SharedMemory(addr string) string {
	_, _, shm := advertised(addr)
	return shm
}
