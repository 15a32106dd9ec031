package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/distrl/distrl/internal/pidfile"
	"golang.org/x/sys/unix"
)

// Listener files: the control word that clients bump after adding a
// channel, and the server's doorbell.
const (
	ctlFile    = "ctl"
	bellFile   = "bell"
	ctlMagic   = "distrlL1"
	offCtlPID  = 8
	offCtlGen  = 64
	ctlFileLen = 4096
)

var seq atomic.Int64

// Env names the environment variable that, set to "0", turns shared-memory
// channels off (DefaultDir returns ""), for measuring against ZeroMQ.
const Env = "DISTRL_SHM"

// DefaultDir is where this user's listeners and doorbells live:
// /dev/shm/distrl-UID. It is "" where there is no /dev/shm, or when
// DISTRL_SHM is "0": shared memory is then not used.
func DefaultDir() string {
	if os.Getenv(Env) == "0" {
		return ""
	}
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return ""
	}
	return filepath.Join("/dev/shm", fmt.Sprintf("distrl-%d", os.Getuid()))
}

// name is a fresh name for this process's kind-prefixed entry.
func name(kind string) string {
	return fmt.Sprintf("%s-%d-%d", kind, os.Getpid(), seq.Add(1))
}

// prepare makes the private directory parent and removes what processes
// that are gone left in it: listeners and doorbells are named after their
// process, so a killed one is found.
func prepare(parent string) error {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("shm: directory %s: %w", parent, err)
	}
	if err := pidfile.Sweep(parent, ownerPID); err != nil {
		return fmt.Errorf("shm: directory %s: %w", parent, err)
	}
	return nil
}

// Listener is a server's end: the directory clients Dial.
type Listener struct {
	dir  string
	bell *Doorbell
	ctl  []byte
	gen  *uint64
	seen uint64
}

// Listen makes a listener in parent (DefaultDir, usually).
func Listen(parent string) (*Listener, error) {
	if err := prepare(parent); err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, name("s"))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("shm: listener: %w", err)
	}
	l, err := listen(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return l, nil
}

func listen(dir string) (*Listener, error) {
	f, err := os.OpenFile(filepath.Join(dir, ctlFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shm: listener: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(ctlFileLen); err != nil {
		return nil, fmt.Errorf("shm: listener: %w", err)
	}
	ctl, err := unix.Mmap(int(f.Fd()), 0, ctlFileLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: listener: map: %w", err)
	}
	binary.LittleEndian.PutUint32(ctl[offCtlPID:], uint32(os.Getpid()))
	copy(ctl, ctlMagic) // last: a client checks it before trusting the rest
	bell, err := NewDoorbell(filepath.Join(dir, bellFile))
	if err != nil {
		unix.Munmap(ctl)
		return nil, err
	}
	return &Listener{dir: dir, bell: bell, ctl: ctl, gen: (*uint64)(unsafe.Pointer(&ctl[offCtlGen]))}, nil
}

// Dir is what clients Dial.
func (l *Listener) Dir() string { return l.dir }

// Doorbell is the server's doorbell, rung by every client.
func (l *Listener) Doorbell() *Doorbell { return l.bell }

// Accept maps the channels clients added since the last Accept. It costs
// one load from shared memory when there are none. A channel file that
// cannot be opened is removed and reported in the error, next to the
// channels that could.
func (l *Listener) Accept() ([]*Channel, error) {
	gen := atomic.LoadUint64(l.gen)
	if gen == l.seen {
		return nil, nil
	}
	l.seen = gen
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("shm: accept: %w", err)
	}
	var chans []*Channel
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "ch-") || strings.HasSuffix(n, ".tmp") {
			continue
		}
		path := filepath.Join(l.dir, n)
		c, err := openChannel(path)
		// Mapped or not, the name goes: the mapping holds the memory.
		os.Remove(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		chans = append(chans, c)
	}
	return chans, errors.Join(errs...)
}

// Close removes the listener's directory; channels accepted stay usable.
func (l *Listener) Close() error {
	if l.ctl == nil {
		return nil
	}
	err := errors.Join(l.bell.Close(), unix.Munmap(l.ctl), os.RemoveAll(l.dir))
	l.ctl = nil
	return err
}

// Client is a process's end of its channels to servers: its doorbell,
// which every server it dials rings.
type Client struct {
	bell *Doorbell
}

// NewClient makes a client doorbell in parent (DefaultDir, usually).
func NewClient(parent string) (*Client, error) {
	if err := prepare(parent); err != nil {
		return nil, err
	}
	bell, err := NewDoorbell(filepath.Join(parent, name("c")))
	if err != nil {
		return nil, err
	}
	return &Client{bell: bell}, nil
}

// Doorbell is the client's doorbell.
func (c *Client) Doorbell() *Doorbell { return c.bell }

// Dial adds a channel with rings of capacity bytes (0: DefaultCapacity)
// to the listener at dir, and tells it.
func (c *Client) Dial(dir string, capacity int) (*Channel, error) {
	pid, gen, unmap, err := openCtl(dir)
	if err != nil {
		return nil, err
	}
	defer unmap()
	ringer, err := openFIFO(filepath.Join(dir, bellFile))
	if err != nil {
		return nil, err
	}
	ch, err := createChannel(filepath.Join(dir, name("ch")), capacity, c.bell.Path())
	if err != nil {
		ringer.Close()
		return nil, err
	}
	ch.ringer, ch.peerPID = ringer, pid
	atomic.AddUint64(gen, 1)
	if err := ringer.Ring(); err != nil {
		ch.Close()
		return nil, fmt.Errorf("%w: %w", ErrPeerGone, err)
	}
	return ch, nil
}

// openCtl maps a listener's control file and returns its server's pid and
// its generation word.
func openCtl(dir string) (pid int, gen *uint64, unmap func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ctlFile), os.O_RDWR, 0)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("shm: dial %s: %w", dir, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != ctlFileLen {
		return 0, nil, nil, fmt.Errorf("%w: %s is not a listener", ErrCorrupt, dir)
	}
	ctl, err := unix.Mmap(int(f.Fd()), 0, ctlFileLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("shm: dial %s: map: %w", dir, err)
	}
	pid = int(binary.LittleEndian.Uint32(ctl[offCtlPID:]))
	if string(ctl[:len(ctlMagic)]) != ctlMagic || pid <= 0 {
		unix.Munmap(ctl)
		return 0, nil, nil, fmt.Errorf("%w: %s is not a listener", ErrCorrupt, dir)
	}
	return pid, (*uint64)(unsafe.Pointer(&ctl[offCtlGen])), func() { unix.Munmap(ctl) }, nil
}

// Close closes the doorbell and removes its FIFO.
func (c *Client) Close() error { return c.bell.Close() }
